// End to end: the simulated vLLM, the gateway, the RL core and the Python example trainer. A group of agent
// rollouts driven through the gateway (one dropping its reasoning from history, so it leaves several
// trajectories; one finished as infra_error) arrives in Python as a batch whose advantages, tokens and masks
// this test recomputes from the gateway's own trajectories.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { rmSync } from "node:fs";
import { promisify } from "node:util";
import { after, before, test } from "node:test";
import { startCore, type Core } from "../../rl-core/core/index.ts";
import { GRPO_EPS } from "../../rl-core/estimators/index.ts";
import { trainerPython } from "../grpc-helpers.ts";
import { AGENT_SCRIPT, createRollout, playAgent, postJson, ROOT, startStack, tempDir, type Stack } from "../helpers.ts";

const execFileAsync = promisify(execFile);
const python = trainerPython();
const skip = python ? false : "Debian's python3-grpcio, python3-grpc-tools and python3-numpy are not installed (/usr/bin/python3)";
if (!python && process.env.CI) throw new Error(`${skip}: CI must install them`);

let stack: Stack;
let core: Core;
const coreDir = tempDir("e2e-core");

before(async () => {
  // Histories go upstream as sent (no repair), so the rollout that drops its reasoning keeps several trajectories.
  stack = await startStack({ sim: { script: AGENT_SCRIPT }, gateway: { grpcPort: 0, repairHistory: false } });
  core = await startCore({ gateways: [stack.gateway.grpc!.address], port: 0, dataDir: coreDir, tokenBudget: 1_000_000, batchTimeoutMs: 200 });
});
after(async () => {
  await core?.close();
  await stack?.close();
  rmSync(coreDir, { recursive: true, force: true });
});

const sha = (bytes: ArrayBufferView) => createHash("sha256").update(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)).digest("hex");

test("a group driven through the gateway reaches the Python trainer with the advantages recomputed here", { skip, timeout: 120_000 }, async () => {
  const gw = stack.gateway.url;
  const rewards = [1, 0, 0.5, 1];
  const ids: string[] = [];
  for (let i = 0; i < rewards.length; i++) {
    const r = await createRollout(gw, { group: "task-7", task: "count-files", harness: "scripted", metadata: { group_size: 5 } });
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
    row_details: Array<{ rollout_id: string; trajectory_id: string; reward: number; adv_min: number; adv_max: number; adv_masked_out_max_abs: number; tokens_sha256: string; mask_sha256: string; trained: number }>;
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
      expected.set(t.trajectory_id, { tokens: sha(Int32Array.from(t.token_ids)), mask: sha(Uint8Array.from(t.loss_mask)), rollout: i, trained });
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
    assert.ok(Math.abs(row.adv_min - advantage) < 1e-5 && Math.abs(row.adv_max - advantage) < 1e-5, `${row.adv_min} vs ${advantage}`);
    assert.equal(row.adv_masked_out_max_abs, 0);
  }
  assert.ok(Math.abs(batch.weights_sum - 1) < 1e-4);
  assert.equal(batch.acked, true);
  assert.ok(batch.consistency["scripted"]!.pearson > 0.99);
  assert.equal(batch.consistency["*"]!.tokens, [...expected.values()].reduce((n, e) => n + e.trained, 0));
});

test("the Python client computes advantages on request (GAE with its own values, GRPO on its own layout)", { skip, timeout: 60_000 }, async () => {
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
  const batch = { offsets: Int32Array.of(0, 5, 9), lossMask: Uint8Array.of(0, 1, 1, 0, 1, 0, 0, 1, 1), rewards: Float64Array.of(1, 0), groupIds: new Int32Array(2) };
  const values = Float32Array.from({ length: 9 }, (_, i) => -0.5 + i / 8);
  const gae = computeAdvantages(batch, { estimator: "gae", values, gamma: 0.9, lambda: 0.8, whiten: false });
  const grpo = computeAdvantages(batch, { estimator: "grpo" });
  got.gae.forEach((a, i) => assert.ok(Math.abs(a - gae.advantages[i]!) < 1e-5, `gae[${i}] ${a} vs ${gae.advantages[i]}`));
  got.returns.forEach((r, i) => assert.ok(Math.abs(r - gae.returns![i]!) < 1e-5));
  got.grpo.forEach((a, i) => assert.ok(Math.abs(a - grpo.advantages[i]!) < 1e-5));
  assert.ok(got.grpo.some((a) => a !== 0));
});
