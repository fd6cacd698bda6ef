// End to end: `rlgate run` with the real Qwen Code CLI inside bubblewrap sandboxes, n = 4 rollouts of the example task,
// the sim scripted (examples/tasks/fix-add/sim-qwen-code.json) to fix the bug in rollouts 0 and 1 and to overwrite the
// test file in 2 and 3 (which grading reverts). Rewards 1, 1, 0, 0; trajectories built; the group reaches an RL core
// and comes back as one batch with GRPO advantages.
import assert from "node:assert/strict";
import { chmodSync, rmSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { TrainerClient, type TrainingBatch } from "../../clients/ts/index.ts";
import { startGateway, type Gateway } from "../../gateway/index.ts";
import { startCore, type Core } from "../../rl-core/core/index.ts";
import { GRPO_EPS } from "../../rl-core/estimators/index.ts";
import { resolveHarness } from "../../runner/harnesses.ts";
import type { RolloutResult } from "../../runner/rollout.ts";
import { runTasks } from "../../runner/run.ts";
import { DEFAULT_LIMITS } from "../../runner/sandbox.ts";
import { loadTask } from "../../runner/task.ts";
import { loadScript, startSim, type SimServer } from "../../sim/index.ts";
import { ROOT, tempDir } from "../helpers.ts";
import { rolloutDiagnosis, sandboxSkip } from "./runner-support.ts";

const TASK = join(ROOT, "examples", "tasks", "fix-add");
const skip = sandboxSkip("qwen", join(ROOT, "node_modules", "@qwen-code", "qwen-code", "cli.js"));

describe("rlgate run: Qwen Code in sandboxes, graded, delivered to an RL core", { skip }, () => {
  let sim: SimServer;
  let gateway: Gateway;
  let core: Core;
  let client: TrainerClient;
  let results: RolloutResult[];
  const dirs = { data: tempDir("run-e2e-store"), core: tempDir("run-e2e-core"), work: tempDir("run-e2e-work") };

  before(async () => {
    chmodSync(dirs.work, 0o755);
    sim = await startSim({ port: 0, script: loadScript(join(TASK, "sim-qwen-code.json")) });
    gateway = await startGateway({ upstream: sim.url, port: 0, grpcPort: 0, dataDir: dirs.data });
    results = await runTasks({
      tasks: [loadTask(TASK)],
      harness: resolveHarness("qwen-code"),
      n: 4,
      concurrency: 2,
      timeoutSec: 150,
      gatewayUrl: gateway.url,
      limits: DEFAULT_LIMITS,
      workDir: dirs.work,
      // One Node start instead of two (qwen relaunches itself for a larger heap, which this task does not need).
      env: { QWEN_CODE_NO_RELAUNCH: "1" },
    });
  });
  after(async () => {
    client?.close();
    await core?.close();
    await gateway.close();
    await sim.close();
    for (const d of Object.values(dirs)) rmSync(d, { recursive: true, force: true });
  });

  const diag = (r: RolloutResult) => rolloutDiagnosis(gateway.url, r);

  test("rollouts 0 and 1 fix the bug (reward 1), 2 and 3 tamper with the tests (reward 0); every call captured", async () => {
    assert.equal(results.length, 4);
    for (const r of results) {
      assert.equal(r.status, "ok", await diag(r));
      assert.equal(r.harness, "qwen-code");
      assert.equal(r.reward, r.sample < 2 ? 1 : 0, await diag(r));
      assert.ok(r.calls >= 2, `qwen made its calls through the bridge: ${await diag(r)}`);
      assert.ok((r.trajectories ?? 0) >= 1, await diag(r));
    }
    const calls = (await (await fetch(`${gateway.url}/api/rollouts/${results[0]!.rolloutId}/calls`)).json()) as any;
    assert.ok(calls.calls.every((c: any) => c.token_source === "upstream" && c.status === "ok"));
  });

  test("the group goes to an RL core and comes back as one batch with its GRPO advantages", async () => {
    core = await startCore({
      gateways: [gateway.grpc!.address],
      port: 0,
      dataDir: dirs.core,
      batchTimeoutMs: 100,
      tokenBudget: 1_000_000,
      groupTimeoutMs: 60_000,
    });
    client = new TrainerClient(core.address, { deadlineMs: 30_000 });
    const ac = new AbortController();
    let batch: TrainingBatch | undefined;
    for await (const b of client.batches({ signal: ac.signal, maxInFlight: 2 })) {
      batch = b;
      await client.ack([b.batchId]);
      ac.abort();
    }
    assert.ok(batch);
    assert.equal(batch.groups, 1);
    const byRollout = new Map(results.map((r) => [r.rolloutId!, r.reward!]));
    const rewards = [1, 1, 0, 0];
    const mean = 0.5;
    const std = Math.sqrt(rewards.reduce((a, b) => a + (b - mean) ** 2, 0) / (rewards.length - 1));
    const seen = new Set<string>();
    for (let row = 0; row < batch.rows; row++) {
      const id = batch.rowInfo[row]!.rolloutId;
      seen.add(id);
      const expected = (byRollout.get(id)! - mean) / (std + GRPO_EPS);
      for (let t = batch.offsets[row]!; t < batch.offsets[row + 1]!; t++) {
        if (batch.lossMask[t])
          assert.ok(
            Math.abs(batch.advantages[t]! - expected) < 1e-4,
            `row ${row}: ${batch.advantages[t]} vs ${expected}`,
          );
      }
    }
    assert.deepEqual([...seen].sort(), [...byRollout.keys()].sort(), "all four rollouts of the group are in the batch");
  });
});
