import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { test } from "node:test";

// In its own process: node:test treats an unhandled rejection in the test process as a failure of its own.
const SCRIPT = `
import { Registry } from "prom-client";
import { guardProcess } from "./util/crash-guard.ts";
const registry = new Registry();
guardProcess({ log: (line) => console.error(line), registry });
Promise.reject(new Error("nobody handles this"));
setTimeout(() => { throw new Error("thrown from a timer"); }, 10);
setTimeout(async () => { console.log(await registry.metrics()); console.log("still serving"); }, 100);
`;

test("an unhandled rejection and an uncaught exception are logged with their stacks, counted, and not fatal", () => {
  const run = spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", SCRIPT], {
    cwd: new URL("..", import.meta.url).pathname,
    encoding: "utf8",
    timeout: 60_000,
  });
  assert.equal(run.status, 0, run.stderr);
  assert.match(run.stdout, /still serving/);
  assert.match(run.stdout, /rlgate_uncaught_errors_total\{kind="unhandledRejection"\} 1/);
  assert.match(run.stdout, /rlgate_uncaught_errors_total\{kind="uncaughtException"\} 1/);
  assert.match(run.stderr, /unhandledRejection \(survived.*\): Error: nobody handles this\n\s+at /);
  assert.match(run.stderr, /uncaughtException \(survived.*\): Error: thrown from a timer\n\s+at /);
});
