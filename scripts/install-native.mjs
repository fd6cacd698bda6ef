#!/usr/bin/env node
// `npm install` runs this (package.json "install"): it builds the native kernels (native/, C++; CUDA too where nvcc
// exists) when a C++ compiler is there. Without one, or when the build fails, the install still succeeds and rlgate
// runs its TypeScript kernels; this says so loudly, and `rlgate doctor` tells later. RLGATE_REQUIRE_NATIVE=1 (CI)
// makes a missing or failed build fail the install; RLGATE_SKIP_NATIVE=1 skips the build.
import { spawnSync } from "node:child_process";
import { accessSync, constants, existsSync, readdirSync, statSync } from "node:fs";
import { delimiter, join } from "node:path";
import { fileURLToPath } from "node:url";

/** The C++ compiler node-gyp will use: $CXX, else the first of c++, g++, clang++ on PATH; null when none. */
export function findCompiler(env = process.env) {
  const candidates = env.CXX ? [env.CXX.split(" ")[0]] : ["c++", "g++", "clang++"];
  for (const name of candidates) {
    if (name.includes("/")) {
      if (executable(name)) return name;
      continue;
    }
    for (const dir of (env.PATH ?? "").split(delimiter)) {
      if (dir && executable(join(dir, name))) return join(dir, name);
    }
  }
  return null;
}

function executable(path) {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function banner(lines) {
  const rule = "=".repeat(100);
  return [rule, ...lines.map((l) => `rlgate: ${l}`), rule].join("\n");
}

/** The newest modification time under `path` (a file, or a folder walked whole). */
function newest(path) {
  const stat = statSync(path);
  if (!stat.isDirectory()) return stat.mtimeMs;
  return Math.max(0, ...readdirSync(path).map((name) => newest(join(path, name))));
}

/** Whether the built addon is newer than every source it is built from (npm install then leaves it be). */
export function upToDate(root) {
  const addon = join(root, "native/build/Release/rlgate_native.node");
  if (!existsSync(addon)) return false;
  const sources = ["binding.gyp", "src", "cuda"].map((p) => join(root, "native", p)).filter((p) => existsSync(p));
  return statSync(addon).mtimeMs >= Math.max(...sources.map(newest));
}

/**
 * Builds the addon in `root` (npm run build:native). Returns { built, reason }: the reason says why not and what
 * the user gets instead.
 */
export function installNative({ root, env = process.env, stdio = "inherit" }) {
  if (env.RLGATE_SKIP_NATIVE === "1") return { built: false, reason: "skipped (RLGATE_SKIP_NATIVE=1)" };
  // Every npm install runs this (adding a dependency too): a build newer than its sources is kept.
  if (upToDate(root)) return { built: true, reason: "up to date" };
  const compiler = findCompiler(env);
  if (!compiler) {
    return {
      built: false,
      reason: `no C++ compiler found (${env.CXX ? `CXX=${env.CXX}` : "c++, g++, clang++ on PATH"})`,
    };
  }
  // npm sets npm_execpath for lifecycle scripts: the same npm runs the build script (node-gyp comes with it).
  const npm = env.npm_execpath ? [process.execPath, env.npm_execpath] : ["npm"];
  const result = spawnSync(npm[0], [...npm.slice(1), "run", "build:native"], { cwd: root, env, stdio });
  if (result.error) return { built: false, reason: `could not run npm run build:native: ${result.error.message}` };
  if (result.status !== 0)
    return { built: false, reason: `npm run build:native failed (exit ${result.status}) with ${compiler}` };
  return { built: true, reason: null };
}

function main() {
  const root = fileURLToPath(new URL("..", import.meta.url));
  const { built, reason } = installNative({ root });
  if (built) {
    const what = reason === "up to date" ? "up to date, not rebuilt (npm run build:native rebuilds)" : "built";
    console.error(`rlgate: native kernels ${what} (native/build/Release); \`npx rlgate doctor\` checks them`);
    return 0;
  }
  const required = process.env.RLGATE_REQUIRE_NATIVE === "1";
  console.error(
    banner([
      `the native kernels were NOT built: ${reason}.`,
      required
        ? "RLGATE_REQUIRE_NATIVE=1: the install fails."
        : "rlgate works, with the TypeScript reference kernels (slower advantages; native tests skip).",
      "Install a C++ compiler (Debian: apt-get install g++ make python3) and run `npm run build:native`;",
      "`npx rlgate doctor` shows which kernels run.",
    ]),
  );
  return required ? 1 : 0;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) process.exit(main());
