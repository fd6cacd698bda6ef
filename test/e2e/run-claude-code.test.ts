// End to end: `rlgate run` with the real Claude Code CLI (streaming Anthropic Messages) inside bubblewrap sandboxes,
// n = 4 rollouts of the example task, the sim scripted (examples/tasks/fix-add/sim-claude-code.json) to fix the bug in
// rollouts 0 and 1 and to overwrite the test file in 2 and 3 (which grading reverts). Rewards 1, 1, 0, 0; every call
// captured with upstream token ids; one trajectory per rollout.
import assert from "node:assert/strict";
import { chmodSync, rmSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { DEFAULT_SIM_MAX_MODEL_LEN } from "../../cli/serve-command.ts";
import { startGateway, type Gateway } from "../../gateway/index.ts";
import { resolveHarness } from "../../runner/harnesses.ts";
import type { RolloutResult } from "../../runner/rollout.ts";
import { runTasks } from "../../runner/run.ts";
import { DEFAULT_LIMITS } from "../../runner/sandbox.ts";
import { loadTask } from "../../runner/task.ts";
import { loadScript, startSim, type SimServer } from "../../sim/index.ts";
import { ROOT, tempDir } from "../helpers.ts";
import { rolloutDiagnosis, sandboxSkip } from "./runner-support.ts";

const TASK = join(ROOT, "examples", "tasks", "fix-add");
const skip = sandboxSkip("claude", join(ROOT, "node_modules", ".bin", "claude"));

describe("rlgate run: Claude Code in sandboxes, graded", { skip }, () => {
  let sim: SimServer;
  let gateway: Gateway;
  let results: RolloutResult[];
  const dirs = { data: tempDir("run-claude-store"), work: tempDir("run-claude-work") };

  before(async () => {
    chmodSync(dirs.work, 0o755);
    // Claude Code asks for 32k completion tokens on a ~19k-token prompt: the context `rlgate serve`'s sim has.
    sim = await startSim({
      port: 0,
      maxModelLen: DEFAULT_SIM_MAX_MODEL_LEN,
      script: loadScript(join(TASK, "sim-claude-code.json")),
    });
    gateway = await startGateway({ upstream: sim.url, port: 0, grpcPort: 0, dataDir: dirs.data });
    results = await runTasks({
      tasks: [loadTask(TASK)],
      harness: resolveHarness("claude-code"),
      n: 4,
      concurrency: 2,
      timeoutSec: 150,
      gatewayUrl: gateway.url,
      limits: DEFAULT_LIMITS,
      workDir: dirs.work,
    });
  });
  after(async () => {
    await gateway.close();
    await sim.close();
    for (const d of Object.values(dirs)) rmSync(d, { recursive: true, force: true });
  });

  const diag = (r: RolloutResult) => rolloutDiagnosis(gateway.url, r);

  test("rollouts 0 and 1 fix the bug (reward 1), 2 and 3 tamper with the tests (reward 0); every call captured", async () => {
    assert.equal(results.length, 4);
    for (const r of results) {
      assert.equal(r.status, "ok", await diag(r));
      assert.equal(r.harness, "claude-code");
      assert.equal(r.reward, r.sample < 2 ? 1 : 0, await diag(r));
      assert.ok(r.calls >= 2, `claude made its calls through the bridge: ${await diag(r)}`);
      assert.equal(r.trajectories, 1, await diag(r));
      const { calls } = (await (await fetch(`${gateway.url}/api/rollouts/${r.rolloutId}/calls`)).json()) as any;
      assert.ok(
        calls.every((c: any) => c.api === "messages" && c.token_source === "upstream" && c.status === "ok"),
        await diag(r),
      );
    }
  });
});
