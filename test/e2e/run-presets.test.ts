// Every `rlgate run` preset is run by a test: the presets no other run-*.test.ts runs go here, each CLI run for real
// inside a sandbox against the sim's default policy (one shell call, `echo rlgate-sim`, then an answer quoting its
// output): the CLI reaches the gateway through the bridge, its shell tool runs in the sandbox, and every call is
// captured with upstream token ids. A last test checks that no preset of the registry is left out.
import assert from "node:assert/strict";
import { chmodSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { DEFAULT_SIM_MAX_MODEL_LEN } from "../../cli/serve-command.ts";
import { HARNESSES, type Harness } from "../../runner/harnesses.ts";
import { runTasks } from "../../runner/run.ts";
import { DEFAULT_LIMITS } from "../../runner/sandbox.ts";
import { loadTask } from "../../runner/task.ts";
import { ROOT, startStack, tempDir, type Stack } from "../helpers.ts";
import { bwrapForTests } from "../require-in-ci.ts";
import { cliSkip, testModel, testModelMap } from "./harnesses.ts";

const TASK = join(ROOT, "examples", "tasks", "fix-add");
/** Presets run by their own run-*.test.ts (graded with a task script, several rollouts, an RL core…). */
const RUN_ELSEWHERE = ["qwen-code", "claude-code", "openclaw"];
/** Presets this file runs: every other one. */
const HERE = HARNESSES.filter((h) => !RUN_ELSEWHERE.includes(h.name));

const scratch = tempDir("run-presets-probe");
const unavailable = bwrapForTests(scratch);
rmSync(scratch, { recursive: true, force: true });

describe(
  "rlgate run presets in a sandbox",
  { skip: unavailable ? `sandboxes cannot start here: ${unavailable}` : false },
  () => {
    let stack: Stack;
    let work: string;

    before(async () => {
      // Claude-sized prompts and the default policy's short answers: the context `rlgate serve`'s sim has.
      // A preset that needs its own model name (Gemini CLI's is in the URL's path) is given it, mapped to the sim's.
      const modelMap = HERE.filter((h) => h.modelInPath)
        .map(testModelMap)
        .join(",");
      stack = await startStack({ sim: { maxModelLen: DEFAULT_SIM_MAX_MODEL_LEN }, gateway: { modelMap } });
      work = tempDir("run-presets-work");
      chmodSync(work, 0o755);
    });
    after(async () => {
      await stack.close();
      rmSync(work, { recursive: true, force: true });
    });

    const runsIn = async (harness: Harness) => {
      const [r] = await runTasks({
        tasks: [loadTask(TASK)],
        harness,
        ...(harness.modelInPath ? { model: testModel(harness) } : {}),
        n: 1,
        concurrency: 1,
        timeoutSec: 180,
        gatewayUrl: stack.gateway.url,
        limits: { ...DEFAULT_LIMITS, memoryBytes: Math.max(DEFAULT_LIMITS.memoryBytes, harness.minMemoryBytes ?? 0) },
        workDir: work,
      });
      const meta = ((await (await fetch(`${stack.gateway.url}/api/rollouts/${r!.rolloutId}`)).json()) as any).metadata;
      const diag = JSON.stringify({ ...r, logs: meta.runner.logs }).slice(-3000);
      assert.equal(r!.status, "ok", diag);
      assert.equal(r!.harness, harness.name);
      assert.equal(r!.reward, 0, "the sim's default policy does not fix the bug");
      assert.ok(r!.calls >= 2, diag);
      assert.match(meta.runner.logs.agent, /rlgate-sim/, diag);
      const calls = ((await (await fetch(`${stack.gateway.url}/api/rollouts/${r!.rolloutId}/calls`)).json()) as any)
        .calls;
      assert.ok(
        calls.every((c: any) => c.status === "ok" && c.token_source === "upstream"),
        diag,
      );
    };

    for (const harness of HERE) {
      test(
        `${harness.name}: the shell tool runs in the sandbox and every call reaches the gateway`,
        { skip: cliSkip(harness) },
        () => runsIn(harness),
      );
    }
  },
);

test("every preset of the registry is run by a test: here, or by the run-*.test.ts named for it", () => {
  const elsewhere = readdirSync(join(ROOT, "test", "e2e"))
    .filter((f) => f.startsWith("run-") && f !== "run-presets.test.ts")
    .map((f) => readFileSync(join(ROOT, "test", "e2e", f), "utf8"));
  for (const name of RUN_ELSEWHERE)
    assert.ok(
      elsewhere.some((text) => text.includes(`resolveHarness("${name}")`)),
      `${name} is said to be run elsewhere, but no run-*.test.ts resolves it`,
    );
  assert.deepEqual(
    HARNESSES.map((h) => h.name).filter((n) => !RUN_ELSEWHERE.includes(n) && !HERE.some((h) => h.name === n)),
    [],
  );
});
