// The pi preset of `rlgate run` (fast: ~3 s of CLI; OpenCode's takes ~40 s here and is checked by hand, see
// docs/runner.md), the CLI run for real inside a sandbox against the sim's default policy
// (one shell call, `echo rlgate-sim`, then an answer quoting its output): the CLI reaches the gateway through the
// bridge, its shell tool runs in the sandbox, and every call is captured with upstream token ids.
import assert from "node:assert/strict";
import { chmodSync, existsSync, rmSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { resolveHarness } from "../../runner/harnesses.ts";
import { runTasks } from "../../runner/run.ts";
import { DEFAULT_LIMITS } from "../../runner/sandbox.ts";
import { loadTask } from "../../runner/task.ts";
import { ROOT, startStack, tempDir, type Stack } from "../helpers.ts";
import { bwrapForTests, requireInCi } from "../require-in-ci.ts";

const TASK = join(ROOT, "examples", "tasks", "fix-add");
const BIN = join(ROOT, "node_modules", ".bin");
const scratch = tempDir("run-presets-probe");
const unavailable = bwrapForTests(scratch);
rmSync(scratch, { recursive: true, force: true });

describe(
  "rlgate run presets: pi in a sandbox",
  { skip: unavailable ? `sandboxes cannot start here: ${unavailable}` : false },
  () => {
    let stack: Stack;
    let work: string;

    before(async () => {
      stack = await startStack();
      work = tempDir("run-presets-work");
      chmodSync(work, 0o755);
    });
    after(async () => {
      await stack.close();
      rmSync(work, { recursive: true, force: true });
    });

    for (const preset of ["pi"]) {
      test(
        `${preset}: the shell tool runs in the sandbox and every call reaches the gateway`,
        {
          skip: requireInCi(
            `the ${preset} CLI (npm install)`,
            existsSync(join(BIN, preset)) ? null : `${preset} is not installed`,
          ),
        },
        async () => {
          const [r] = await runTasks({
            tasks: [loadTask(TASK)],
            harness: resolveHarness(preset),
            n: 1,
            concurrency: 1,
            timeoutSec: 120,
            gatewayUrl: stack.gateway.url,
            limits: DEFAULT_LIMITS,
            workDir: work,
          });
          const meta = ((await (await fetch(`${stack.gateway.url}/api/rollouts/${r!.rolloutId}`)).json()) as any)
            .metadata;
          const diag = JSON.stringify({ ...r, logs: meta.runner.logs }).slice(-3000);
          assert.equal(r!.status, "ok", diag);
          assert.equal(r!.harness, preset);
          assert.equal(r!.reward, 0, "the sim's default policy does not fix the bug");
          assert.ok(r!.calls >= 2, diag);
          assert.match(meta.runner.logs.agent, /rlgate-sim/, diag);
          const calls = ((await (await fetch(`${stack.gateway.url}/api/rollouts/${r!.rolloutId}/calls`)).json()) as any)
            .calls;
          assert.ok(
            calls.every((c: any) => c.status === "ok" && c.token_source === "upstream"),
            diag,
          );
        },
      );
    }
  },
);
