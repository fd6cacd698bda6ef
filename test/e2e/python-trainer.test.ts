// End to end: the simulated vLLM, the gateway, the RL core and the Python example trainer. A group of agent
// rollouts driven through the gateway (one dropping its reasoning from history, so it leaves several
// trajectories; one finished as infra_error) arrives in Python as a batch whose advantages, tokens and masks
// this test recomputes from the gateway's own trajectories. Then agent rollouts of several trajectories (main agent
// re-serialized, sub-agents trained too) in a group used for two generations, an equal-reward generation and a
// rollout without a group go to one core per estimator, and an independent NumPy implementation
// (numpy_reference.py) recomputes every batch's advantages and loss weights, and compares the advantages the
// core gives on request over the served batch.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { rmSync } from "node:fs";
import { promisify } from "node:util";
import { after, before, test } from "node:test";
import { startCore, type Core } from "../../rl-core/core/index.ts";
import { GRPO_EPS } from "../../rl-core/estimators/index.ts";
import { trainerPython } from "../grpc-helpers.ts";
import {
  AGENT_SCRIPT,
  createRollout,
  playAgent,
  postJson,
  ROOT,
  startStack,
  tempDir,
  TOOLS,
  until,
  type Stack,
} from "../helpers.ts";

const execFileAsync = promisify(execFile);
const python = trainerPython();
const skip = python
  ? false
  : "Debian's python3-grpcio, python3-grpc-tools and python3-numpy are not installed (/usr/bin/python3)";
if (!python && process.env.CI) throw new Error(`${skip}: CI must install them`);

let stack: Stack;
let core: Core;
const coreDir = tempDir("e2e-core");

before(async () => {
  // Histories go upstream as sent (no repair), so the rollout that drops its reasoning keeps several trajectories.
  stack = await startStack({ sim: { script: AGENT_SCRIPT }, gateway: { grpcPort: 0, repairHistory: false } });
  core = await startCore({
    gateways: [stack.gateway.grpc!.address],
    port: 0,
    dataDir: coreDir,
    tokenBudget: 1_000_000,
    batchTimeoutMs: 200,
    lossTokens: 4096,
  });
});
after(async () => {
  await core?.close();
  await stack?.close();
  rmSync(coreDir, { recursive: true, force: true });
});

const sha = (bytes: ArrayBufferView) =>
  createHash("sha256")
    .update(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength))
    .digest("hex");

test(
  "a group driven through the gateway reaches the Python trainer with the advantages recomputed here",
  { skip, timeout: 120_000 },
  async () => {
    const gw = stack.gateway.url;
    const rewards = [1, 0, 0.5, 1];
    const ids: string[] = [];
    for (let i = 0; i < rewards.length; i++) {
      const r = await createRollout(gw, {
        group: "task-7",
        task: "count-files",
        harness: "scripted",
        metadata: { group_size: 5 },
        policy_version: "v3",
      });
      await playAgent(r.base_urls.openai, 3, i !== 1); // rollout 1 drops reasoning: history re-serialized
      assert.equal((await postJson(`${gw}/api/rollouts/${r.id}/finish`, { reward: rewards[i] })).status, 200);
      ids.push(r.id);
    }
    const broken = await createRollout(gw, { group: "task-7", harness: "scripted", metadata: { group_size: 5 } });
    await playAgent(broken.base_urls.openai, 1, true);
    await postJson(`${gw}/api/rollouts/${broken.id}/finish`, { status: "infra_error" });

    const { stdout } = await execFileAsync(
      python!,
      ["clients/python/example_trainer.py", "--core", core.address, "--max-batches", "1", "--json"],
      { cwd: ROOT, timeout: 90_000 },
    );
    const batch = JSON.parse(stdout.trim().split("\n")[0]!) as {
      rows: number;
      groups: number;
      weights_sum: number;
      acked: boolean;
      consistency: Record<string, { pearson: number; tokens: number }>;
      loss_tokens: number;
      trained_tokens: number;
      policy_versions: string[];
      row_details: Array<{
        rollout_id: string;
        trajectory_id: string;
        reward: number;
        adv_min: number;
        adv_max: number;
        adv_masked_out_max_abs: number;
        tokens_sha256: string;
        mask_sha256: string;
        trained: number;
        generation: number;
        calls: Array<{ seq: number; policy_version: string; finish_reason: string }>;
        trained_per_call: number[];
        finish_reason: string;
      }>;
    };

    // Expected rows: every trajectory with trained tokens of the four kept rollouts, none of the infra_error one.
    const expected = new Map<string, { tokens: string; mask: string; rollout: number; trained: number }>();
    for (let i = 0; i < ids.length; i++) {
      const rec = (await (await fetch(`${gw}/api/rollouts/${ids[i]}/trajectories`)).json()) as {
        trajectories: Array<{ trajectory_id: string; token_ids: number[]; loss_mask: number[]; trained: boolean }>;
      };
      if (i === 1) assert.ok(rec.trajectories.length > 1, "dropping reasoning leaves several trajectories");
      for (const t of rec.trajectories) {
        const trained = t.loss_mask.filter((m) => m === 1).length;
        if (!t.trained || trained === 0) continue;
        expected.set(t.trajectory_id, {
          tokens: sha(Int32Array.from(t.token_ids)),
          mask: sha(Uint8Array.from(t.loss_mask)),
          rollout: i,
          trained,
        });
      }
    }
    assert.equal(batch.groups, 1);
    assert.deepEqual(batch.row_details.map((r) => r.trajectory_id).sort(), [...expected.keys()].sort());
    assert.ok(!batch.row_details.some((r) => r.rollout_id === broken.id), "infra_error rollout dropped");

    // GRPO over the four kept rollouts, each one sample however many trajectories it left.
    const mean = rewards.reduce((a, b) => a + b, 0) / rewards.length;
    const std = Math.sqrt(rewards.reduce((a, b) => a + (b - mean) ** 2, 0) / (rewards.length - 1));
    for (const row of batch.row_details) {
      const want = expected.get(row.trajectory_id)!;
      const advantage = (rewards[want.rollout]! - mean) / (std + GRPO_EPS);
      assert.equal(row.tokens_sha256, want.tokens, "token ids as the gateway reconstructed them");
      assert.equal(row.mask_sha256, want.mask, "loss mask as the gateway reconstructed it");
      assert.equal(row.trained, want.trained);
      assert.ok(
        Math.abs(row.adv_min - advantage) < 1e-5 && Math.abs(row.adv_max - advantage) < 1e-5,
        `${row.adv_min} vs ${advantage}`,
      );
      assert.equal(row.adv_masked_out_max_abs, 0);
    }
    // Loss weights over the global token count: the batch weighs its trained tokens / N.
    assert.equal(batch.loss_tokens, 4096);
    assert.ok(Math.abs(batch.weights_sum - batch.trained_tokens / 4096) < 1e-6, `${batch.weights_sum}`);
    assert.deepEqual(batch.policy_versions, ["v3"]);
    for (const row of batch.row_details) {
      assert.equal(row.generation, 1);
      assert.ok(row.calls.length >= 1 && row.calls.every((c) => c.policy_version === "v3"));
      assert.equal(
        row.trained_per_call.reduce((a, b) => a + b, 0),
        row.trained,
        "every trained token has its call",
      );
      // The row's last call: the answer (stop), or a tool call where a re-serialized history left the row.
      assert.equal(row.finish_reason, row.calls[row.calls.length - 1]!.finish_reason);
      assert.ok(["stop", "tool_calls"].includes(row.finish_reason), row.finish_reason);
    }
    assert.equal(batch.acked, true);
    assert.ok(batch.consistency["scripted"]!.pearson > 0.99);
    assert.equal(
      batch.consistency["*"]!.tokens,
      [...expected.values()].reduce((n, e) => n + e.trained, 0),
    );
  },
);

test(
  "the Python client computes advantages on request (GAE with its own values, GRPO on its own layout)",
  { skip, timeout: 60_000 },
  async () => {
    const script = `
import json, sys
import numpy as np
sys.path.insert(0, "clients/python")
from rlgate_client import TrainerClient
offsets = np.array([0, 5, 9], dtype=np.int32)
mask = np.array([0, 1, 1, 0, 1, 0, 0, 1, 1], dtype=np.uint8)
values = np.linspace(-0.5, 0.5, 9).astype(np.float32)
with TrainerClient(sys.argv[1]) as c:
    gae = c.compute_advantages(values=values, offsets=offsets, loss_mask=mask, rewards=[1.0, 0.0], gamma=0.9, lam=0.8, whiten=False)
    grpo = c.compute_advantages(estimator="grpo", offsets=offsets, loss_mask=mask, rewards=[1.0, 0.0], group_ids=[0, 0])
    print(json.dumps({"gae": gae["advantages"].tolist(), "returns": gae["returns"].tolist(), "grpo": grpo["advantages"].tolist()}))
`;
    const { stdout } = await execFileAsync(python!, ["-c", script, core.address], { cwd: ROOT, timeout: 30_000 });
    const got = JSON.parse(stdout) as { gae: number[]; returns: number[]; grpo: number[] };
    const { computeAdvantages } = await import("../../rl-core/estimators/index.ts");
    const batch = {
      offsets: Int32Array.of(0, 5, 9),
      lossMask: Uint8Array.of(0, 1, 1, 0, 1, 0, 0, 1, 1),
      rewards: Float64Array.of(1, 0),
      groupIds: new Int32Array(2),
    };
    const values = Float32Array.from({ length: 9 }, (_, i) => -0.5 + i / 8);
    const gae = computeAdvantages(batch, { estimator: "gae", values, gamma: 0.9, lambda: 0.8, whiten: false });
    const grpo = computeAdvantages(batch, { estimator: "grpo" });
    got.gae.forEach((a, i) =>
      assert.ok(Math.abs(a - gae.advantages[i]!) < 1e-5, `gae[${i}] ${a} vs ${gae.advantages[i]}`),
    );
    got.returns.forEach((r, i) => assert.ok(Math.abs(r - gae.returns![i]!) < 1e-5));
    got.grpo.forEach((a, i) => assert.ok(Math.abs(a - grpo.advantages[i]!) < 1e-5));
    assert.ok(got.grpo.some((a) => a !== 0));
  },
);

/** One agent rollout: the main agent (re-serialized when it drops its reasoning) and, optionally, a sub-agent. */
async function agentRollout(
  gw: string,
  group: string | null,
  size: number,
  reward: number,
  keepReasoning: boolean,
  subAgents: number,
): Promise<string> {
  const r = await createRollout(gw, {
    ...(group ? { group } : {}),
    task: "count-files",
    harness: "scripted",
    metadata: { group_size: size },
  });
  await playAgent(r.base_urls.openai, 3, keepReasoning);
  for (let k = 0; k < subAgents; k++) {
    const res = await fetch(`${r.base_urls.openai}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      // With tools: an agent of its own (a one-shot call without tools is an auxiliary side call).
      body: JSON.stringify({
        messages: [
          { role: "system", content: `You are sub-agent ${k}: look around.` },
          { role: "user", content: "Go." },
        ],
        tools: TOOLS,
      }),
    });
    assert.equal(res.status, 200);
    await res.json();
  }
  assert.equal((await postJson(`${gw}/api/rollouts/${r.id}/finish`, { reward })).status, 200);
  return r.id;
}

test(
  "an independent NumPy implementation recomputes every estimator's batches: rollouts as samples, generations, no signal kept at 0",
  { skip, timeout: 300_000 },
  async () => {
    // No history repair: a main agent that drops its reasoning leaves re-serialized trajectories.
    const agents = await startStack({
      sim: { script: AGENT_SCRIPT },
      gateway: { grpcPort: 0, repairHistory: false, trajectories: { trainSegments: ["main", "sub_agent"] } },
    });
    const estimators = [
      { estimator: "grpo", normalize: "batch", lossAgg: "seq-mean-token-mean" },
      { estimator: "dr-grpo", normalize: "none", lossAgg: "token-mean" },
      { estimator: "rloo", normalize: "none", lossAgg: "seq-mean-token-mean" },
      { estimator: "opo", normalize: "none", lossAgg: "token-mean" },
      { estimator: "reinforce++-baseline", normalize: "none", lossAgg: "token-mean" },
      { estimator: "tree", normalize: "none", lossAgg: "token-mean" },
    ] as const;
    const dirs: string[] = [];
    const cores: Core[] = [];
    try {
      for (const e of estimators) {
        const dir = tempDir(`e2e-${e.estimator}`);
        dirs.push(dir);
        cores.push(
          await startCore({
            gateways: [agents.gateway.grpc!.address],
            consumerGroup: `numpy-${e.estimator}`,
            port: 0,
            metricsPort: null,
            dataDir: dir,
            estimator: e.estimator,
            normalize: e.normalize,
            lossAgg: e.lossAgg,
            batchUnit: "group",
            tokenBudget: 1_000_000,
            lossTokens: 4096,
            batchTimeoutMs: 200,
          }),
        );
      }
      const gw = agents.gateway.url;
      // Generation 1 of task-9: rollouts of 1, 2+ (re-serialized) and 3 trajectories (two sub-agents).
      await agentRollout(gw, "task-9", 3, 1, true, 0);
      await agentRollout(gw, "task-9", 3, 0, false, 0);
      await agentRollout(gw, "task-9", 3, 0.25, true, 2);
      // Generation 2 of the same name: equal rewards (no signal); and a rollout without a group (no baseline).
      await agentRollout(gw, "task-9", 2, 1, false, 1);
      await agentRollout(gw, "task-9", 2, 1, true, 0);
      await agentRollout(gw, null, 1, 0.5, false, 1);
      const results = await Promise.all(
        cores.map(async (c, i) => {
          const e = estimators[i]!;
          // Three groups, three batches (whole groups each, one per group as they complete).
          await until(() => (c.status().groupsDone >= 3 ? true : undefined), 60_000, `${e.estimator}: groups`);
          await c.flush();
          const { stdout } = await execFileAsync(
            python!,
            [
              "test/e2e/numpy_reference.py",
              "--core",
              c.address,
              "--estimator",
              e.estimator,
              "--normalize",
              e.normalize,
              "--loss-agg",
              e.lossAgg,
              "--batches",
              String(c.status().batchesReady),
            ],
            { cwd: ROOT, timeout: 120_000 },
          );
          return JSON.parse(stdout) as {
            estimator: string;
            rows: number;
            generations: string[];
            segments: string[];
            max_abs_diff_advantages: number;
            max_abs_diff_loss_weights: number;
            max_abs_diff_compute_advantages: number;
            no_signal_rows_nonzero: number;
          };
        }),
      );
      for (const r of results) {
        assert.deepEqual(
          r.generations,
          ["#0", "task-9#1", "task-9#2"],
          `${r.estimator}: both generations and the lone rollout trained`,
        );
        assert.ok(r.rows >= 8, `${r.estimator}: ${r.rows} rows`);
        assert.deepEqual(
          r.segments,
          ["main", "sub_agent"],
          `${r.estimator}: sub-agents trained as rows of their rollouts`,
        );
        assert.ok(
          r.max_abs_diff_advantages < 2e-5,
          `${r.estimator}: advantages differ by ${r.max_abs_diff_advantages}`,
        );
        assert.ok(
          r.max_abs_diff_loss_weights < 1e-7,
          `${r.estimator}: loss weights differ by ${r.max_abs_diff_loss_weights}`,
        );
        assert.equal(r.max_abs_diff_compute_advantages, 0, `${r.estimator}: ComputeAdvantages over the served batch`);
        assert.equal(r.no_signal_rows_nonzero, 0, `${r.estimator}: no signal stays 0`);
      }
      console.log(JSON.stringify(results));
    } finally {
      await Promise.all(cores.map((c) => c.close()));
      await agents.close();
      for (const d of dirs) rmSync(d, { recursive: true, force: true });
    }
  },
);
