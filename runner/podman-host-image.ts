// A small Debian image made offline from the host's own installed packages (no registry, no network): the files of a
// list of packages and everything they depend on, as dpkg recorded them, imported with `podman import`. Tests, the
// benchmark and the docs' example build task images FROM it. Content-addressed: the tag is a hash of the packages'
// names and versions, so it is built once per machine and reused until a package changes.
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import {
  chmodSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { CONTAINER_UID, podman } from "./podman.ts";

/** What tasks and harnesses need at least: a shell and coreutils, Python, git, and what the isolation tests probe with. */
export const HOST_IMAGE_PACKAGES = [
  "bash",
  "dash",
  "coreutils",
  "python3-minimal",
  "python3.11",
  "git",
  "curl",
  "sed",
  "grep",
  "mawk",
  "procps",
  "findutils",
  "util-linux",
  "libstdc++6",
  "tar",
  "gzip",
  "diffutils",
  "patch",
  "ca-certificates",
];

interface Installed {
  version: string;
  depends: string[][];
}

/** Installed packages from dpkg's status file, with their (pre-)dependencies as lists of alternatives. */
function installedPackages(): { packages: Map<string, Installed>; provides: Map<string, string> } {
  const packages = new Map<string, Installed>();
  const provides = new Map<string, string>();
  for (const block of readFileSync("/var/lib/dpkg/status", "utf8").split("\n\n")) {
    const fields: Record<string, string> = {};
    for (const line of block.split("\n")) {
      const colon = line.indexOf(":");
      if (colon > 0 && !line.startsWith(" ")) fields[line.slice(0, colon)] = line.slice(colon + 1).trim();
    }
    const name = fields["Package"];
    if (!name || !fields["Status"]?.endsWith("installed") || fields["Status"].includes("not-installed")) continue;
    const depends = [fields["Pre-Depends"], fields["Depends"]]
      .filter(Boolean)
      .flatMap((d) => d!.split(","))
      .map((alt) => alt.split("|").map((a) => a.trim().split(/[\s:(]/)[0]!))
      .filter((alts) => alts[0]);
    packages.set(name, { version: fields["Version"] ?? "", depends });
    for (const p of (fields["Provides"] ?? "").split(",")) {
      const virtual = p.trim().split(/[\s(]/)[0];
      if (virtual && !provides.has(virtual)) provides.set(virtual, name);
    }
  }
  return { packages, provides };
}

/** The packages and their transitive dependencies that are installed here (first installed alternative). */
export function packageClosure(roots: string[]): Map<string, string> {
  const { packages, provides } = installedPackages();
  const resolve = (n: string) => (packages.has(n) ? n : provides.get(n));
  const out = new Map<string, string>();
  const stack = [...roots];
  while (stack.length) {
    const name = resolve(stack.pop()!);
    if (!name || out.has(name)) continue;
    const p = packages.get(name)!;
    out.set(name, p.version);
    for (const alts of p.depends) {
      const first = alts.find((a) => resolve(a));
      if (first) stack.push(first);
    }
  }
  for (const r of roots) if (!resolve(r)) throw new Error(`package ${r} is not installed on this machine`);
  return out;
}

/** The files dpkg installed for the packages, with merged-/usr paths made canonical (bin/x → usr/bin/x). */
function packageFiles(names: Iterable<string>): string[] {
  const files = new Set<string>();
  for (const name of names) {
    const list = [`/var/lib/dpkg/info/${name}.list`, `/var/lib/dpkg/info/${name}:amd64.list`].find(existsSync);
    if (!list) continue;
    for (const path of readFileSync(list, "utf8").split("\n")) {
      if (!path || path === "/.") continue;
      let st;
      try {
        st = lstatSync(path);
      } catch {
        continue;
      }
      if (st.isDirectory()) continue;
      files.add(join(realpathSync(dirname(path)), basename(path)).slice(1));
    }
  }
  // Merged /usr: the top-level links themselves.
  for (const top of ["bin", "sbin", "lib", "lib64", "lib32", "libx32"])
    if (existsSync(`/${top}`) && lstatSync(`/${top}`).isSymbolicLink()) files.add(top);
  return [...files].sort();
}

// v2: /tmp 1777 (v1 images have it 1755).
const RECIPE = "rlgate-host-image v2";

/** The image's tag for these packages at their installed versions (its content address). */
export function hostImageTag(packages: string[] = HOST_IMAGE_PACKAGES): string {
  const closure = packageClosure(packages);
  const hash = createHash("sha256").update(RECIPE);
  for (const [name, version] of [...closure].sort()) hash.update(`\n${name} ${version}`);
  return `localhost/rlgate-host-base:${hash.digest("hex").slice(0, 16)}`;
}

/** Builds (or finds) the image; returns its tag. */
export async function ensureHostImage(packages: string[] = HOST_IMAGE_PACKAGES): Promise<string> {
  const tag = hostImageTag(packages);
  if (podman(["image", "exists", tag]).status === 0) return tag;
  const files = packageFiles(packageClosure(packages).keys());
  const extra = mkdtempSync(join(tmpdir(), "rlgate-host-image-"));
  try {
    // Users and an empty /tmp, which no package ships (base-passwd writes /etc/passwd in a maintainer script).
    mkdirSync(join(extra, "etc"));
    mkdirSync(join(extra, "tmp"));
    // Not through mkdir's mode, which the umask narrows (to 1755: the container user could not write /tmp).
    chmodSync(join(extra, "tmp"), 0o1777);
    mkdirSync(join(extra, "root"));
    writeFileSync(
      join(extra, "etc", "passwd"),
      `root:x:0:0:root:/root:/bin/bash\nagent:x:${CONTAINER_UID}:${CONTAINER_UID}:agent:/home/agent:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n`,
    );
    writeFileSync(join(extra, "etc", "group"), `root:x:0:\nagent:x:${CONTAINER_UID}:\nnogroup:x:65534:\n`);
    writeFileSync(join(extra, "files"), files.join("\n") + "\n");
    const tar = spawn(
      "bash",
      [
        "-c",
        `set -o pipefail; tar -C / --no-recursion -cf - -T "$1" -C "$2" etc/passwd etc/group tmp root | podman import - "$3"`,
        "import",
        join(extra, "files"),
        extra,
        tag,
      ],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    let err = "";
    tar.stderr.on("data", (d: Buffer) => (err += d));
    const code = await new Promise<number | null>((resolve) => tar.on("close", resolve));
    if (code !== 0) throw new Error(`podman import of the host image failed: ${err.trim().slice(-1000)}`);
    return tag;
  } finally {
    rmSync(extra, { recursive: true, force: true });
  }
}

// `npx tsx runner/podman-host-image.ts`: builds (or finds) the image and tags it localhost/rlgate-host-base:latest,
// a stable name for task.json's "image".
if (process.argv[1] && fileURLToPath(import.meta.url) === resolve(process.argv[1])) {
  const tag = await ensureHostImage();
  const latest = "localhost/rlgate-host-base:latest";
  const r = podman(["tag", tag, latest]);
  if (r.status !== 0) throw new Error(`podman tag ${tag} ${latest}: ${r.stderr}`);
  console.log(`${tag}\n${latest}`);
}
