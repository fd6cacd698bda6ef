// The clean-clone walk (scripts/readme-walk.ts): README.md and docs/cli.md's shell blocks run verbatim, in order,
// in a fresh copy of the tree against the gateway the README starts; any failing block, or a harness call the gateway
// did not count as ok, fails it. The harness CLIs it drives are devDependencies, which CI installs. Then the docs
// pages whose walk takes seconds, each on its own; every page: `npm run test:docs-walk` (minutes, a job of its own).
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { requireInCi } from "./require-in-ci.ts";
import { trainerPython } from "./grpc-helpers.ts";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const CLIS = ["qwen", "claude", "codex", "pi"].map((name) => join(ROOT, "node_modules", ".bin", name));
const missing = CLIS.filter((cli) => !existsSync(cli));
const skip = requireInCi("the harness CLIs (npm install)", missing.length ? `missing ${missing.join(", ")}` : null);

test("README.md and docs/cli.md run as written, every harness call ok", { skip, timeout: 600_000 }, () => {
  const walk = spawnSync(
    process.execPath,
    ["--import", "tsx", "scripts/readme-walk.ts", "--timeout", "540", "README.md", "docs/cli.md"],
    { cwd: ROOT, encoding: "utf8", maxBuffer: 64 * 1024 * 1024 },
  );
  const output = `${walk.stdout}${walk.stderr}`;
  assert.equal(walk.status, 0, output.slice(-6000));
  assert.match(output, /walk: every block ran/);
  assert.match(output, /walk: harness calls the gateway counted: ok \d+/);
});

/** Pages a walk of a few seconds each: one gateway (or two), curl, the Python client. */
const QUICK_PAGES = ["docs/surfaces.md", "docs/weight-updates.md"];

const noPython = trainerPython() ? null : "no /usr/bin/python3 with grpc and numpy (docs/weight-updates.md's trainer)";

test(
  "the quickest docs pages run as written, each on its own",
  {
    timeout: 300_000,
    skip: requireInCi("python3-grpcio python3-numpy", noPython),
  },
  () => {
    const walk = spawnSync(
      process.execPath,
      ["--import", "tsx", "scripts/readme-walk.ts", "--each", "--timeout", "120", ...QUICK_PAGES],
      { cwd: ROOT, encoding: "utf8", maxBuffer: 64 * 1024 * 1024 },
    );
    const output = `${walk.stdout}${walk.stderr}`;
    assert.equal(walk.status, 0, output.slice(-6000));
    for (const page of QUICK_PAGES) assert.match(output, new RegExp(`  ok   ${page}: \\d+ run`));
  },
);
