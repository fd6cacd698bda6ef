// The RL core in process, fed by a gateway's trajectory stream, read by the TypeScript trainer client: batches
// whose advantages are recomputed here, consistency figures in /metrics, advantages on request (GAE), and a core
// restart with a group half received.
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import { TrainerClient, type TrainingBatch } from "../clients/ts/index.ts";
import type { Gateway } from "../gateway/index.ts";
import { startCore, type Core } from "../rl-core/core/index.ts";
import { computeAdvantages, GRPO_EPS } from "../rl-core/estimators/index.ts";
import { referenceKernels } from "../rl-core/kernels/index.ts";
import { putSyntheticRollout, startGrpcGateway } from "./grpc-helpers.ts";
import { tempDir, until } from "./helpers.ts";

function grpo(rewards: number[]): number[] {
  const mean = rewards.reduce((a, b) => a + b, 0) / rewards.length;
  const std = Math.sqrt(rewards.reduce((a, b) => a + (b - mean) ** 2, 0) / (rewards.length - 1));
  return rewards.map((r) => (r - mean) / (std + GRPO_EPS));
}

async function take(client: TrainerClient, n: number, ack = true): Promise<TrainingBatch[]> {
  const out: TrainingBatch[] = [];
  const ac = new AbortController();
  for await (const b of client.batches({ signal: ac.signal, maxInFlight: 4 })) {
    out.push(b);
    if (ack) await client.ack([b.batchId]);
    if (out.length >= n) ac.abort();
  }
  return out;
}

describe("rl core", () => {
  let gw: Gateway;
  let core: Core;
  let client: TrainerClient;
  const coreDir = tempDir("core");
  const startMyCore = () =>
    startCore({
      gateways: [gw.grpc!.address],
      port: 0,
      dataDir: coreDir,
      batchTimeoutMs: 100,
      tokenBudget: 100_000,
      groupTimeoutMs: 60_000,
    });

  before(async () => {
    gw = await startGrpcGateway();
    core = await startMyCore();
    client = new TrainerClient(core.address, { deadlineMs: 10_000 });
  });
  after(async () => {
    client.close();
    await core.close();
    await gw.close();
    rmSync(coreDir, { recursive: true, force: true });
  });

  test("a group becomes a batch: GRPO advantages on trained tokens, infra_error dropped, tokens as reconstructed", async () => {
    const rewards = [1, 0, 0.25];
    for (let i = 0; i < 3; i++) {
      await putSyntheticRollout(gw.context.store, {
        id: `a${i}`,
        group: "A",
        task: "t",
        metadata: { group_size: 4 },
        reward: rewards[i]!,
        turns: 3,
      });
    }
    await putSyntheticRollout(gw.context.store, {
      id: "a3",
      group: "A",
      metadata: { group_size: 4 },
      reward: null,
      status: "infra_error",
    });
    const [batch] = await take(client, 1);
    assert.ok(batch);
    assert.deepEqual(
      batch.rowInfo.map((r) => r.rolloutId),
      ["a0", "a1", "a2"],
    );
    assert.equal(batch.estimator, "grpo");
    assert.equal(batch.groups, 1);
    const expected = grpo(rewards);
    for (let r = 0; r < batch.rows; r++) {
      const id = batch.rowInfo[r]!.rolloutId;
      const res = await fetch(`${gw.url}/api/rollouts/${id}/trajectories`);
      const rec = (await res.json()) as {
        trajectories: Array<{ token_ids: number[]; loss_mask: number[]; logprobs: number[] }>;
      };
      const a: number = batch.offsets[r]!;
      const b: number = batch.offsets[r + 1]!;
      assert.deepEqual([...batch.tokenIds.subarray(a, b)], rec.trajectories[0]!.token_ids);
      assert.deepEqual([...batch.lossMask.subarray(a, b)], rec.trajectories[0]!.loss_mask);
      assert.deepEqual([...batch.logprobs.subarray(a, b)], rec.trajectories[0]!.logprobs.map(Math.fround));
      for (let t = a; t < b; t++) {
        if (batch.lossMask[t]) assert.ok(Math.abs(batch.advantages[t]! - expected[r]!) < 1e-5);
        else assert.equal(batch.advantages[t], 0);
      }
    }
    const trained = batch.lossMask.reduce((s, m) => s + m, 0);
    assert.equal(batch.trainedTokens, trained);
    // Normalised by the global token count (the token budget by default): the batch counts by its trained tokens.
    assert.equal(batch.lossTokens, 100_000);
    assert.ok(
      Math.abs(batch.lossWeights.reduce((s, w) => s + w, 0) - trained / 100_000) < 1e-6,
      "token-mean weights sum to trained / N",
    );
  });

  test("logprob reports give consistency figures per harness (also in /metrics) and truncated importance weights", async () => {
    await putSyntheticRollout(gw.context.store, { id: "solo", reward: 1, harness: "qwen-code" });
    const [batch] = await take(client, 1, false);
    assert.ok(batch);
    const trainer = batch.logprobs.map((x, i) => x + (i % 2 ? 0.05 : -0.05));
    const report = await client.reportLogprobs(batch.batchId, trainer, { ack: true, importanceCap: 1.02 });
    assert.equal(report.acked, true);
    const h = report.harnesses.find((c) => c.harness === "qwen-code")!;
    assert.equal(h.tokens, batch.trainedTokens);
    assert.ok(h.pearson > 0.99);
    assert.ok(Math.abs(h.absDiffP50 - 0.05) < 1e-5);
    for (let t = 0; t < batch.tokens; t++) {
      const w = report.importanceWeights![t]!;
      if (!batch.lossMask[t]) assert.equal(w, 0);
      else assert.ok(Math.abs(w - Math.min(Math.exp(trainer[t]! - batch.logprobs[t]!), 1.02)) < 1e-5);
    }
    const text = await (await fetch(core.metricsUrl!)).text();
    assert.match(text, /rlgate_core_logprob_pearson\{harness="qwen-code"\} 0\.99/);
    assert.match(text, /rlgate_core_logprob_abs_diff\{harness="qwen-code",quantile="0.99"\}/);
    await assert.rejects(client.reportLogprobs(batch.batchId, trainer), /NOT_FOUND|no batch/);
  });

  test("advantages on request: GAE with the trainer's values over a served batch, as the reference computes it", async () => {
    for (let i = 0; i < 2; i++)
      await putSyntheticRollout(gw.context.store, {
        id: `gae${i}`,
        group: "G",
        metadata: { group_size: 2 },
        reward: i,
      });
    const [batch] = await take(client, 1, false);
    assert.ok(batch);
    const values = Float32Array.from({ length: batch.tokens }, (_, i) => Math.sin(i) / 4);
    const res = await client.computeAdvantages({ batchId: batch.batchId, values, gamma: 0.99, lambda: 0.95 });
    const ref = computeAdvantages(
      {
        offsets: batch.offsets,
        lossMask: batch.lossMask,
        rewards: Float64Array.from(batch.rowInfo, (r) => r.reward),
        groupIds: new Int32Array(batch.rows),
      },
      { estimator: "gae", values, gamma: 0.99, lambda: 0.95 },
      { kernels: referenceKernels },
    );
    for (let t = 0; t < batch.tokens; t++) assert.ok(Math.abs(res.advantages[t]! - ref.advantages[t]!) < 1e-5);
    assert.ok(res.returns);
    await assert.rejects(
      client.computeAdvantages({ batchId: batch.batchId, values: new Float32Array(3) }),
      /INVALID_ARGUMENT/,
    );
    await client.ack([batch.batchId]);
  });

  test("a core restarted with a group half received completes it once: it claims what it holds, nothing is sent twice", async () => {
    const receivedBefore = core.status().rolloutsReceived;
    await putSyntheticRollout(gw.context.store, { id: "h0", group: "H", metadata: { group_size: 3 }, reward: 1 });
    await putSyntheticRollout(gw.context.store, { id: "h1", group: "H", metadata: { group_size: 3 }, reward: 0 });
    // Both halves received (the group is pending from the first one on).
    await until(
      () =>
        core.status().rolloutsReceived >= receivedBefore + 2 && core.status().groupsPending === 1 ? true : undefined,
      10_000,
      "pending group",
    );
    client.close();
    await core.close();
    await putSyntheticRollout(gw.context.store, { id: "h2", group: "H", metadata: { group_size: 3 }, reward: 0.5 });
    core = await startMyCore();
    client = new TrainerClient(core.address, { deadlineMs: 10_000 });
    const [batch] = await take(client, 1);
    assert.ok(batch);
    assert.deepEqual(batch.rowInfo.map((r) => r.rolloutId).sort(), ["h0", "h1", "h2"]);
    // h0 and h1 were in the core's store: claimed when it resubscribed, not delivered again.
    assert.equal(core.status().rolloutsReceived, 1);
    assert.equal(core.status().rolloutsDuplicate, 0);
    // Everything is acked: nothing is delivered again.
    const committed = gw.context.store.finishedAfter(0, 1000).at(-1)!.cursor;
    await until(
      () => (gw.grpc!.stream.group("rl-core").committed === committed ? true : undefined),
      10_000,
      "all acked",
    );
  });
});
