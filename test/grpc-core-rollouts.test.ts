// Issue 15 end to end: agent rollouts driven through the gateway (the simulated vLLM, a main agent whose history is
// re-serialized, a sub-agent with its own system prompt, trained here too), into the core, read by the TypeScript
// trainer client. What a trainer needs reaches every row (policy version per call, sampling parameters, finish
// reason, the call of every token, segment); a group name used again is trained as its next generation; advantages
// asked for over each served batch equal the batch's own, the group split over batches; bad input is refused.
import { fromSnakeCase } from "../util/json-case.ts";
import assert from "node:assert/strict";
import { createServer } from "node:net";
import { rmSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import { TrainerClient, type TrainingBatch } from "../clients/ts/index.ts";
import { Core, startCore } from "../rl-core/core/index.ts";
import { computeAdvantages } from "../rl-core/estimators/index.ts";
import { referenceKernels } from "../rl-core/kernels/index.ts";
import { freePort } from "../util/listen.ts";
import {
  AGENT_SCRIPT,
  createRollout,
  playAgent,
  postJson,
  startStack,
  tempDir,
  TOOLS,
  until,
  type Stack,
} from "./helpers.ts";

interface ApiTrajectory {
  trajectoryId: string;
  segment: string;
  trained: boolean;
  tokenIds: number[];
  lossMask: number[];
  spans: Array<{ start: number; end: number; callSeq: number }>;
}

let stack: Stack;
let core: Core;
let client: TrainerClient;
const coreDir = tempDir("core-rollouts");

/** One agent rollout: the main agent (re-serialized when it drops its reasoning), optionally a sub-agent call. */
async function play(
  group: string,
  reward: number,
  opts: { keepReasoning: boolean; subAgent: boolean },
): Promise<string> {
  const gw = stack.gateway.url;
  const r = await createRollout(gw, {
    group,
    task: "count-files",
    harness: "scripted",
    metadata: { group_size: 3 },
    policy_version: "v7",
  });
  await playAgent(r.base_urls.openai, 3, opts.keepReasoning);
  if (opts.subAgent) {
    const res = await fetch(`${r.base_urls.openai}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-rlgate-policy-version": "v8" },
      body: JSON.stringify({
        messages: [
          { role: "system", content: "You are a sub-agent: list the files and report back." },
          { role: "user", content: "List them." },
        ],
        temperature: 0.7,
        top_p: 0.9,
        top_k: 20,
        tools: TOOLS, // an agent of its own (a one-shot call without tools would be an auxiliary side call)
      }),
    });
    assert.equal(res.status, 200, await res.clone().text());
    await res.json();
  }
  assert.equal((await postJson(`${gw}/api/rollouts/${r.id}/finish`, { reward })).status, 200);
  return r.id;
}

async function trajectoriesOf(id: string): Promise<ApiTrajectory[]> {
  const res = await fetch(`${stack.gateway.url}/api/rollouts/${id}/trajectories`);
  return fromSnakeCase<{ trajectories: ApiTrajectory[] }>(await res.json()).trajectories;
}

/** Batches until every trained trajectory of `ids` arrived; none acked. */
async function batchesFor(ids: string[]): Promise<TrainingBatch[]> {
  const want = new Set<string>();
  for (const id of ids)
    for (const t of await trajectoriesOf(id)) if (t.trained && t.lossMask.some((m) => m)) want.add(t.trajectoryId);
  const out: TrainingBatch[] = [];
  const ac = new AbortController();
  for await (const b of client.batches({ signal: ac.signal, maxInFlight: 64 })) {
    out.push(b);
    for (const r of b.rowInfo) want.delete(r.trajectoryId);
    if (want.size === 0) ac.abort();
  }
  return out;
}

before(async () => {
  // No history repair: a main agent that drops its reasoning leaves re-serialized trajectories.
  stack = await startStack({
    sim: { script: AGENT_SCRIPT },
    gateway: { grpcPort: 0, repairHistory: false, trajectories: { trainSegments: ["main", "sub_agent"] } },
  });
  // A small budget: each rollout is a batch of its own (rollouts are never split), so groups span batches.
  core = await startCore({
    gateways: [stack.gateway.grpc!.address],
    port: 0,
    dataDir: coreDir,
    tokenBudget: 64,
    batchTimeoutMs: 100,
    groupTimeoutMs: 60_000,
  });
  client = new TrainerClient(core.address, { deadlineMs: 10_000 });
});
after(async () => {
  client?.close();
  await core?.close();
  await stack?.close();
  rmSync(coreDir, { recursive: true, force: true });
});

describe("issue 15 through gateway and core", () => {
  let first: TrainingBatch[] = [];
  let ids: string[] = [];

  test(
    "every row carries its calls (policy version, sampling, finish reason), the call of every token, and its segment",
    { timeout: 60_000 },
    async () => {
      ids = [
        await play("task-a", 1, { keepReasoning: true, subAgent: true }),
        await play("task-a", 0, { keepReasoning: false, subAgent: false }),
        await play("task-a", 0.5, { keepReasoning: false, subAgent: true }),
      ];
      first = await batchesFor(ids);
      const rows = first.flatMap((b) => b.rowInfo.map((info, r) => ({ b, info, r })));
      assert.ok(
        rows.filter((x) => x.info.rolloutId === ids[1]).length >= 2,
        "the re-serialized rollout has several trajectories",
      );
      assert.ok(
        rows.some((x) => x.info.segment === "sub_agent"),
        "the sub-agent is a row of its own",
      );
      for (const { b, info, r } of rows) {
        const traj = (await trajectoriesOf(info.rolloutId)).find((t) => t.trajectoryId === info.trajectoryId)!;
        const a = b.offsets[r]!;
        // The call of every token: the span's call, -1 on context.
        const expected = new Array<number>(traj.tokenIds.length).fill(-1);
        for (const s of traj.spans) expected.fill(s.callSeq, s.start, s.end);
        const got = [...b.callIndex.subarray(a, a + traj.tokenIds.length)].map((i) =>
          i < 0 ? -1 : info.calls[i]!.seq,
        );
        assert.deepEqual(got, expected, `${info.trajectoryId}: call of every token`);
        assert.equal(info.segment, traj.segment);
        const sub = info.segment === "sub_agent";
        for (const call of info.calls) {
          assert.equal(call.policyVersion, sub ? "v8" : "v7", "header, else the rollout's version");
          if (sub) assert.deepEqual([call.temperature, call.topP, call.topK], [0.7, 0.9, 20]);
          else assert.equal(call.temperature, undefined, "not set by the request");
        }
        assert.equal(info.finishReason, info.calls[info.calls.length - 1]!.finishReason);
        assert.ok(["stop", "tool_calls", "length"].includes(info.finishReason), info.finishReason);
        assert.equal(info.generation, 1);
        assert.equal(info.late, false);
      }
    },
  );

  test("3. ComputeAdvantages over each served batch equals its own advantages, the group split over batches", async () => {
    assert.ok(first.length >= 3, "a small budget gives a batch per rollout");
    for (const b of first) {
      const res = await client.computeAdvantages({ batchId: b.batchId, estimator: "grpo" });
      assert.deepEqual([...res.advantages], [...b.advantages], `batch ${b.batchId}`);
    }
    // One sample per rollout: GRPO over the three rewards.
    const ref = computeAdvantages(
      {
        offsets: Int32Array.of(0, 1, 2, 3),
        lossMask: Uint8Array.of(1, 1, 1),
        rewards: Float64Array.of(1, 0, 0.5),
        groupIds: new Int32Array(3),
      },
      { estimator: "grpo" },
      { kernels: referenceKernels },
    );
    for (const b of first) {
      b.rowInfo.forEach((info, r) => {
        for (let t = b.offsets[r]!; t < b.offsets[r + 1]!; t++) {
          if (b.lossMask[t])
            assert.ok(Math.abs(b.advantages[t]! - ref.advantages[ids.indexOf(info.rolloutId)]!) < 1e-6);
        }
      });
    }
  });

  test("8. GAE params given in part and non-finite trainer logprobs are INVALID_ARGUMENT; ref logprobs give KL per row and in the reward", async () => {
    const b = first[0]!;
    const values = new Float32Array(b.tokens);
    await assert.rejects(
      client.computeAdvantages({ batchId: b.batchId, values, gamma: 0.99 }),
      /INVALID_ARGUMENT.*lambda/,
    );
    const nan = b.logprobs.slice();
    nan[b.lossMask.indexOf(1)] = NaN;
    await assert.rejects(client.reportLogprobs(b.batchId, nan), /INVALID_ARGUMENT.*finite/);
    await assert.rejects(
      client.computeAdvantages({ batchId: b.batchId, values, klCoef: 0.1 }),
      /INVALID_ARGUMENT.*ref/,
    );

    const ref = b.logprobs.map((x, t) => (b.lossMask[t] ? x - 0.1 : 0));
    const report = await client.reportLogprobs(b.batchId, ref, { kind: "ref" });
    assert.equal(report.rowKl.length, b.rows);
    for (const kl of report.rowKl) {
      assert.ok(Math.abs(kl.k1 - 0.1) < 1e-5, `k1 ${kl.k1}`); // policy (inference) − ref
      assert.ok(Math.abs(kl.k2 - 0.005) < 1e-5, `k2 ${kl.k2}`);
      assert.ok(Math.abs(kl.k3 - (Math.exp(-0.1) + 0.1 - 1)) < 1e-5, `k3 ${kl.k3}`);
    }
    const withKl = await client.computeAdvantages({ batchId: b.batchId, estimator: "reinforce++", klCoef: 0.5 });
    const expected = computeAdvantages(
      { offsets: b.offsets, lossMask: b.lossMask, rewards: Float64Array.from(b.rowInfo, (r) => r.reward) },
      {
        estimator: "reinforce++",
        tokenRewards: Float32Array.from(b.lossMask, (m, t) => (m ? -0.5 * (b.logprobs[t]! - ref[t]!) : 0)),
      },
      { kernels: referenceKernels },
    );
    for (let t = 0; t < b.tokens; t++) assert.ok(Math.abs(withKl.advantages[t]! - expected.advantages[t]!) < 1e-4);
    await client.ack(first.map((x) => x.batchId));
  });

  test(
    "1. a group name used again is trained as its next generation, nothing dropped",
    { timeout: 60_000 },
    async () => {
      const again = [
        await play("task-a", 0, { keepReasoning: true, subAgent: false }),
        await play("task-a", 1, { keepReasoning: false, subAgent: false }),
        await play("task-a", 1, { keepReasoning: true, subAgent: false }),
      ];
      const batches = await batchesFor(again);
      const rows = batches.flatMap((b) => b.rowInfo).filter((r) => again.includes(r.rolloutId));
      assert.ok(rows.length >= 3);
      for (const r of rows) assert.equal(r.generation, 2);
      await client.ack(batches.map((b) => b.batchId));
      const status = await client.status();
      assert.equal(status.rolloutsLate, 0);
      assert.deepEqual(status.rolloutsDropped, {});
      const text = await (await fetch(core.metricsUrl!)).text();
      assert.doesNotMatch(text, /rlgate_core_rollouts_dropped_total\{reason="late"\}/);
    },
  );
});

describe("Core lifecycle (issue 12)", () => {
  test("a start that fails part-way closes what it opened: the trainer port and the store are free again", async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", () => resolve()));
    const busy = (taken.address() as { port: number }).port;
    const port = await freePort();
    const dir = tempDir("core-failed-start");
    try {
      await assert.rejects(
        Core.start({ gateways: [stack.gateway.grpc!.address], port, metricsPort: busy, dataDir: dir }),
        /EADDRINUSE/,
      );
      const again = await Core.start({
        gateways: [stack.gateway.grpc!.address],
        port,
        metricsPort: null,
        dataDir: dir,
        consumerGroup: "other",
      });
      assert.equal(again.port, port);
      await until(() => (again.status().gatewaysConnected[0] ? true : undefined), 10_000, "connected");
      await again.close();
      await again.close(); // idempotent
    } finally {
      taken.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
