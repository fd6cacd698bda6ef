// A copy of this working tree as git sees it: tracked and untracked files, nothing git ignores (no node_modules, no
// store, no build), each with its modification time, so a build the copy shares is as up to date as here. For runs
// that must not touch this checkout: the README walk, a fresh `npm install --omit=dev`.
import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, statSync, symlinkSync, utimesSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = fileURLToPath(new URL("..", import.meta.url));

/** Copies the working tree into `dir`; each of `shared` (ignored paths built here, e.g. node_modules) is linked. */
export function copyWorkingTree(dir: string, shared: readonly string[] = []): void {
  const listed = spawnSync("git", ["ls-files", "-z", "--cached", "--others", "--exclude-standard"], {
    cwd: ROOT,
    encoding: "utf8",
  });
  if (listed.status !== 0) throw new Error(`git ls-files failed: ${listed.stderr}`);
  for (const file of new Set(listed.stdout.split("\0").filter(Boolean))) {
    if (!existsSync(join(ROOT, file))) continue; // deleted in the working tree, not yet in the index
    mkdirSync(dirname(join(dir, file)), { recursive: true });
    copyFileSync(join(ROOT, file), join(dir, file));
    // Times too: the native build counts as up to date when no source is newer (npx runs the install script again).
    const { atime, mtime } = statSync(join(ROOT, file));
    utimesSync(join(dir, file), atime, mtime);
  }
  for (const path of shared) {
    if (!existsSync(join(ROOT, path))) continue;
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    symlinkSync(join(ROOT, path), join(dir, path));
  }
}
