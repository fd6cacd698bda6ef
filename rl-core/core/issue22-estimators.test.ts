// Issue 22, the estimator items: 5 (seq-mean-token-sum-norm's scale), 6 (tree's root counts rollouts that left no
// trajectory), 7 (reinforce++'s γ on request), singletons, overlong rollouts and KL in the reward of served batches.
// Every expected number is computed here from the references' definitions (cited at each test), not by the code under
// test; the tree case is also recomputed by NumPy.
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { describe, test } from "node:test";
import { Server } from "@grpc/grpc-js";
import { TrainerClient } from "../../clients/ts/index.ts";
import { maskedWhiten } from "../kernels/index.ts";
import {
  bindServer,
  bytesOf,
  float32s,
  int32s,
  serverOptions,
  shutdownServer,
  trainerService,
  uint8s,
  type CallInfo,
  type CoreStatus,
} from "../../protocol/index.ts";
import { buildBatch } from "./batch-packer.ts";
import type { PendingRollout, ReadyRow, StoredBatch } from "./core-store.ts";
import { startCore } from "./core.ts";
import { requireInCi } from "../../test/require-in-ci.ts";
import { estimatorSettingsProblem, overlongPenalty, type OutcomeEstimator } from "./estimator-settings.ts";
import { groupAdvantages, type GroupOptions } from "./group-advantages.ts";
import { memoryBatchSource, pending, type Row } from "./test-support.ts";
import { servedOutcomeAdvantages } from "./served-advantages.ts";
import { TrainerService } from "./trainer-service.ts";

/** A Python with NumPy: RLGATE_PYTHON, Debian's, or the one on PATH; null when none has it. */
const numpyPython =
  [process.env.RLGATE_PYTHON, "/usr/bin/python3", "python3"].find(
    (p) => p && spawnSync(p, ["-c", "import numpy"]).status === 0,
  ) ?? null;

const close = (a: number, b: number, what: string, tol = 1e-6) =>
  assert.ok(Math.abs(a - b) <= tol * Math.max(1, Math.abs(b)), `${what}: ${a} vs ${b}`);

/** Trained-token advantages of a row. */
function trained(row: ReadyRow): number[] {
  const mask = uint8s(row.lossMask);
  return [...float32s(row.advantages)].filter((_, i) => mask[i] === 1);
}

/** A single-row rollout of `n` tokens: a 2-token prompt (mask 0), then n − 2 sampled ones unique to it. */
function simple(id: string, reward: number, n: number, extra: Partial<PendingRollout> = {}): PendingRollout {
  const base = 1000 * (id.charCodeAt(0) - 96) + 10 * Number(id.replace(/\D/g, "") || 0);
  const ids = [1, 2, ...Array.from({ length: n - 2 }, (_, i) => base + i)];
  return pending(id, reward, [{ ids, mask: [0, 0, ...Array(n - 2).fill(1)] }], extra);
}

/** Calls and a per-token call index for rows of one call each (call k sampled row k's mask-1 tokens). */
function oneCallPerRow(rows: Row[], finish: string[]): Pick<PendingRollout, "calls" | "callIndex"> {
  const calls: CallInfo[] = finish.map((f, k) => ({ seq: k, policyVersion: "1", finishReason: f }));
  const index = rows.flatMap((r, k) => r.mask.map((m) => (m ? k : -1)));
  return { calls, callIndex: bytesOf(Int32Array.from(index)) };
}

function sumWeights(batch: StoredBatch): number {
  return float32s(batch.lossWeights).reduce((s, x) => s + x, 0);
}

describe("issue 22 item 5: seq-mean-token-sum-norm is Dr.GRPO's loss, normalised like every other mode", () => {
  // Rollouts of one batch each, all of `len` trained tokens (+ 2 prompt tokens).
  const rowsOf = async (n: number, len: number, prefix: string) =>
    (
      await groupAdvantages(
        Array.from({ length: n }, (_, i) => simple(`${prefix}${i}`, i % 2, len + 2)),
        { estimator: "dr-grpo" },
      )
    ).rows;

  test("issue 22 item 5: per batch (--loss-tokens 0) the weights are Dr.GRPO's: mean over rollouts of token sum / L", async () => {
    // Dr.GRPO (understand-r1-zero / oat): masked_sum(loss, mask, axis=-1, constant_normalizer=generate_max_length),
    // then the mean over the batch; verl's agg_loss (core_algos.py) "seq-mean-token-sum-norm": seq_losses =
    // masked_sum(...) / loss_scale_factor, then sum / (number of sequences). Both: (1/S) Σ_i Σ_t loss_it / L.
    const rows = [
      ...(await groupAdvantages([simple("a", 1, 12), simple("b", 0, 7)], { estimator: "dr-grpo" })).rows,
      ...(await groupAdvantages([simple("c", 1, 30)], { estimator: "dr-grpo" })).rows,
    ];
    const L = 64;
    const batch = await buildBatch(1, rows, {
      normalize: "none",
      lossAgg: "seq-mean-token-sum-norm",
      estimator: "dr-grpo",
      maxLen: L,
      lossTokens: 0,
    });
    const offsets = int32s(batch.offsets);
    const mask = uint8s(batch.lossMask);
    const w = float32s(batch.lossWeights);
    const loss = Float64Array.from(w, (_, t) => Math.sin(t + 1)); // any per-token loss
    let drgrpo = 0;
    for (let r = 0; r < batch.rows; r++) {
      let seqSum = 0;
      for (let t = offsets[r]!; t < offsets[r + 1]!; t++) seqSum += mask[t]! * loss[t]!;
      drgrpo += seqSum / L / batch.rows; // one row per rollout here
    }
    const weighted = loss.reduce((s, x, t) => s + x * w[t]!, 0);
    close(weighted, drgrpo, "sum(w · loss) = Dr.GRPO's loss", 1e-6);
    w.forEach((x, t) => assert.equal(x, mask[t] ? Math.fround(1 / (3 * L)) : 0, `token ${t}`));
  });

  test("issue 22 item 5: with --loss-tokens N a batch counts T/N (T/N · ℓ̄/L), the same N for every batch, whatever its rollouts", async () => {
    const N = 1000;
    const L = 64;
    const build = async (rows: ReadyRow[]) =>
      buildBatch(1, rows, {
        normalize: "none",
        lossAgg: "seq-mean-token-sum-norm",
        estimator: "dr-grpo",
        maxLen: L,
        lossTokens: N,
      });
    // The complaint: the weights summed to T/L, growing with the rollouts per batch. Now a batch of rollouts
    // that used their whole budget L counts exactly T/N, as token-mean's.
    for (const n of [2, 4, 9]) {
      const full = await build(await rowsOf(n, L, `f${n}-`));
      close(sumWeights(full), (n * L) / N, `${n} rollouts of L tokens: T/N`, 1e-5);
    }
    // Shorter rollouts count T/N · ℓ̄/L, and every token weighs ℓ̄/(N·L): the same in a batch of 2 or of 6 rollouts of
    // that length, so a trainer summing the batches of a step gets one loss whatever the batch cuts.
    const two = await build(await rowsOf(2, 40, "s"));
    const six = await build(await rowsOf(6, 40, "t"));
    for (const b of [two, six]) {
      const mask = uint8s(b.lossMask);
      float32s(b.lossWeights).forEach((x, t) => close(x, mask[t] ? 40 / (N * L) : 0, `token ${t}`, 1e-6));
      close(sumWeights(b), (b.trainedTokens / N) * (40 / L), "T/N · ℓ̄/L", 1e-5);
    }
    assert.equal(six.lossTokens, N);
  });

  test("issue 22 item 5: without --max-len the mode is refused, in a sentence, before the core opens anything", async () => {
    const problem = estimatorSettingsProblem({ estimator: "grpo", lossAgg: "seq-mean-token-sum-norm" });
    assert.match(problem ?? "", /seq-mean-token-sum-norm needs --max-len L/);
    assert.equal(
      estimatorSettingsProblem({ estimator: "grpo", lossAgg: "seq-mean-token-sum-norm", maxLen: 512 }),
      null,
    );
    await assert.rejects(
      startCore({ gateways: [], dataDir: "/nonexistent/never-opened", lossAgg: "seq-mean-token-sum-norm", port: 0 }),
      (e: Error) => e.name === "StartRefusal" && /needs --max-len/.test(e.message),
    );
    await assert.rejects(
      buildBatch(1, await rowsOf(2, 4, "x"), {
        normalize: "none",
        lossAgg: "seq-mean-token-sum-norm",
        estimator: "grpo",
      }),
      /needs --max-len/,
    );
  });
});

describe("issue 22 item 6: tree's V(root) is the mean over every kept rollout of the group", () => {
  // A and B share their prompt (mask 0) and nothing they sampled; C was kept (reward 1) but left no trained
  // trajectory.
  const rowsA: Row[] = [{ ids: [1, 2, 3, 10, 11], mask: [0, 0, 0, 1, 1] }];
  const rowsB: Row[] = [{ ids: [1, 2, 3, 20, 21, 22], mask: [0, 0, 0, 1, 1, 1] }];
  const group = () => [
    pending("a", 1, rowsA),
    pending("b", 0, rowsB),
    pending("c", 1, [{ ids: [1, 2, 3, 30], mask: [0, 0, 0, 1] }], { trained: bytesOf(Uint8Array.of(0)) }),
  ];

  test("issue 22 item 6: a kept rollout that left no trajectory counts in V(root), as in the outcome estimators", async () => {
    // TreeRL (arXiv:2506.11902): A(n) = ((V(n) − V(root)) + (V(n) − V(parent))) / √|L(n)|.
    // V(root) = mean(1, 0, 1) = 2/3 (the group mean, what dr-grpo's baseline is); the prompt node P holds A and B,
    // V(P) = 1/2, and is the branch parent of A's and B's own nodes (one rollout each):
    //   A: (1 − 2/3) + (1 − 1/2) = 0.8333…   B: (0 − 2/3) + (0 − 1/2) = −1.1667
    // (before the fix V(root) was the mean over A and B alone, 1/2: A +1, B −1).
    const { rows, kept } = await groupAdvantages(group(), { estimator: "tree" });
    assert.equal(kept, 3);
    assert.deepEqual(
      rows.map((r) => r.rolloutId),
      ["a", "b"],
    );
    const byHand: Record<string, number> = { a: 1 - 2 / 3 + (1 - 1 / 2), b: 0 - 2 / 3 + (0 - 1 / 2) };
    for (const row of rows) for (const x of trained(row)) close(x, byHand[row.rolloutId]!, row.rolloutId, 1e-6);
    // The same root as the outcome estimators: dr-grpo's baseline is the mean over all three, C included.
    const dr = await groupAdvantages(group(), { estimator: "dr-grpo" });
    for (const row of dr.rows) for (const x of trained(row)) close(x, row.reward - 2 / 3, `dr-grpo ${row.rolloutId}`);
  });

  test(
    "issue 22 item 6: the same advantages recomputed by NumPy from TreeRL's definition",
    {
      skip: requireInCi(
        "python3-numpy",
        numpyPython ? null : "no Python with NumPy (RLGATE_PYTHON, /usr/bin/python3, python3)",
      ),
    },
    async () => {
      // For each trained token: S = the rollouts with a row through that prefix, V = their mean reward; the parent
      // is the longest shorter prefix with more rollouts, else the root, the mean over all kept rollouts.
      const script = `
import json, sys
import numpy as np
d = json.load(sys.stdin)
rewards = d["rewards"]
root = float(np.mean(list(rewards.values())))
sets = {}
for rid, ids, _ in d["rows"]:
    for t in range(len(ids)):
        sets.setdefault(tuple(ids[: t + 1]), set()).add(rid)
out = []
for rid, ids, mask in d["rows"]:
    for t in range(len(ids)):
        if not mask[t]:
            continue
        s = sets[tuple(ids[: t + 1])]
        v = np.mean([rewards[x] for x in s])
        parent = root
        for u in range(t - 1, -1, -1):
            q = sets[tuple(ids[: u + 1])]
            if len(q) > len(s):
                parent = np.mean([rewards[x] for x in q])
                break
        out.append(float(((v - root) + (v - parent)) / np.sqrt(len(s))))
print(json.dumps(out))
`;
      const input = JSON.stringify({
        rewards: { a: 1, b: 0, c: 1 },
        rows: [
          ["a", rowsA[0]!.ids, rowsA[0]!.mask],
          ["b", rowsB[0]!.ids, rowsB[0]!.mask],
        ],
      });
      const numpy = JSON.parse(execFileSync(numpyPython!, ["-c", script], { input }).toString()) as number[];
      const ours = (await groupAdvantages(group(), { estimator: "tree" })).rows.flatMap(trained);
      assert.equal(ours.length, numpy.length);
      ours.forEach((x, i) => close(x, numpy[i]!, `token ${i} vs NumPy`, 1e-6));
    },
  );
});

/** A TrainerService over one in-memory batch, served on a loopback port, with the TypeScript client. */
async function serve(
  batch: StoredBatch,
  options: Partial<ConstructorParameters<typeof TrainerService>[0]> = {},
): Promise<{ client: TrainerClient; close(): Promise<void> }> {
  const batches = new Map([[batch.batchId, batch]]);
  const source = memoryBatchSource(batches);
  const service = new TrainerService({
    source,
    token: null,
    status: () => ({}) as CoreStatus,
    ...options,
  });
  const server = new Server(serverOptions());
  server.addService(trainerService, service.handlers());
  const port = await bindServer(server, "127.0.0.1", 0);
  const client = new TrainerClient(`127.0.0.1:${port}`, { deadlineMs: 10_000 });
  return {
    client,
    close: async () => {
      client.close();
      await shutdownServer(server, 1000);
    },
  };
}

describe("issue 22 item 7: ComputeAdvantages checks reinforce++'s γ as GAE's and the CLI's", () => {
  test("issue 22 item 7: γ = 1.5 (or < 0) is INVALID_ARGUMENT, γ in [0, 1] is computed", async () => {
    const rows = (await groupAdvantages([simple("a", 1, 5), simple("b", 0, 4)], { estimator: "reinforce++" })).rows;
    const batch = await buildBatch(7, rows, { normalize: "none", lossAgg: "token-mean", estimator: "reinforce++" });
    const { client, close: stop } = await serve(batch);
    try {
      for (const gamma of [1.5, -0.1]) {
        await assert.rejects(
          client.computeAdvantages({ batchId: 7, estimator: "reinforce++", gamma }),
          /INVALID_ARGUMENT.*gamma must be in \[0, 1\]/,
        );
        // The trainer's own layout too.
        await assert.rejects(
          client.computeAdvantages({
            offsets: Int32Array.of(0, 3),
            lossMask: Uint8Array.of(0, 1, 1),
            rewards: [1],
            estimator: "reinforce++",
            gamma,
          }),
          /INVALID_ARGUMENT.*gamma/,
        );
      }
      const ok = await client.computeAdvantages({ batchId: 7, estimator: "reinforce++", gamma: 1 });
      assert.deepEqual([...ok.advantages], [...float32s(batch.advantages)], "γ = 1 reproduces the batch");
    } finally {
      await stop();
    }
  });
});

describe("issue 22: --singleton zero|raw", () => {
  const estimators: OutcomeEstimator[] = ["grpo", "dr-grpo", "rloo", "opo", "reinforce++-baseline"];

  test("zero (default): a group of one gets 0 and no_signal; raw: its reward, as verl's outcome estimators", async () => {
    // verl/trainer/ppo/core_algos.py: compute_grpo_outcome_advantage sets mean 0, std 1 for a group of one, so
    // (r − 0) / (1 + epsilon) (norm_adv_by_std_in_grpo, epsilon 1e-6), r − 0 without (Dr.GRPO);
    // compute_rloo_outcome_advantage leaves a lone score unchanged (response_num > 1 only);
    // compute_opo_outcome_advantage and compute_reinforce_plus_plus_baseline_outcome_advantage take baseline 0.
    const verl: Record<OutcomeEstimator, (r: number) => number> = {
      grpo: (r) => r / (1 + 1e-6),
      "dr-grpo": (r) => r,
      rloo: (r) => r,
      opo: (r) => r,
      "reinforce++-baseline": (r) => r,
    };
    for (const estimator of estimators) {
      const options: GroupOptions = { estimator, whitenScope: "batch" };
      const zero = await groupAdvantages([simple("a", 0.75, 6)], options);
      assert.ok(
        trained(zero.rows[0]!).every((x) => x === 0),
        `${estimator} zero`,
      );
      assert.equal(zero.rows[0]!.signal, "none");
      const raw = await groupAdvantages([simple("a", 0.75, 6)], { ...options, singleton: "raw" });
      for (const x of trained(raw.rows[0]!)) close(x, verl[estimator](0.75), `${estimator} raw`, 1e-7);
      assert.equal(raw.rows[0]!.signal, "ok", "its baseline is 0: not no_signal");
      const batch = await buildBatch(1, raw.rows, { normalize: "none", lossAgg: "token-mean", estimator });
      assert.equal(batch.rowInfo[0]!.noSignal, false);
    }
  });

  test("raw with REINFORCE++-baseline: the lone rollout joins the batch whitening (verl whitens every row), and requests agree", async () => {
    const lone = (await groupAdvantages([simple("a", 2, 5)], { estimator: "reinforce++-baseline", singleton: "raw" }))
      .rows;
    const pair = (
      await groupAdvantages(
        [simple("b", 1, 4, { groupKey: "group:h#1" }), simple("c", 0, 6, { groupKey: "group:h#1" })],
        {
          estimator: "reinforce++-baseline",
          singleton: "raw",
        },
      )
    ).rows;
    const batch = await buildBatch(1, [...lone, ...pair], {
      normalize: "none",
      lossAgg: "token-mean",
      estimator: "reinforce++-baseline",
      whitenScope: "batch",
    });
    const offsets = int32s(batch.offsets);
    const mask = uint8s(batch.lossMask);
    // verl: scores − id2mean (0 for a group of one), tiled over the response, masked_whiten over the batch.
    const raw = new Float32Array(mask.length);
    const centred: Record<string, number> = { a: 2, b: 0.5, c: -0.5 };
    batch.rowInfo.forEach((r, i) => {
      for (let t = offsets[i]!; t < offsets[i + 1]!; t++) raw[t] = mask[t] ? centred[r.rolloutId]! : 0;
    });
    const expected = maskedWhiten({ offsets, x: raw, mask });
    float32s(batch.advantages).forEach((x, t) => close(x, expected[t]!, `token ${t}`, 1e-5));
    const asked = await servedOutcomeAdvantages(batch, "reinforce++-baseline", "batch", "none", "raw");
    assert.deepEqual([...asked], [...float32s(batch.advantages)]);
  });

  test("raw is refused with tree and reinforce++ (no group baseline to leave out)", () => {
    for (const estimator of ["tree", "reinforce++"] as const)
      assert.match(
        estimatorSettingsProblem({ estimator, singleton: "raw" }) ?? "",
        /--singleton raw applies to the outcome/,
      );
  });
});

describe("issue 22: --overlong drop|mask|penalty (DAPO)", () => {
  // b's only trajectory ends in a call cut at the generation limit; a's first call was cut but the agent went on
  // (its trajectory ends with a `stop`): not cut. c is a plain rollout.
  const rowsA: Row[] = [{ ids: [1, 2, 101, 102, 5, 103, 104], mask: [0, 0, 1, 1, 0, 1, 1] }];
  const callsA = {
    calls: [
      { seq: 0, policyVersion: "1", finishReason: "length" },
      { seq: 1, policyVersion: "1", finishReason: "stop" },
    ],
    callIndex: bytesOf(Int32Array.of(-1, -1, 0, 0, -1, 1, 1)),
  };
  const rowsB: Row[] = [{ ids: [1, 2, 201, 202, 203], mask: [0, 0, 1, 1, 1] }];
  const group = () => [
    pending("a", 1, rowsA, callsA),
    pending("b", 0.5, rowsB, oneCallPerRow(rowsB, ["length"])),
    simple("c", 0, 4),
  ];

  test("drop: the cut rollout leaves advantage and loss, counted overlong", async () => {
    const res = await groupAdvantages(group(), { estimator: "dr-grpo", overlong: "drop" });
    assert.deepEqual(res.dropped, [{ rolloutId: "b", reason: "overlong" }]);
    assert.equal(res.kept, 2);
    // dr-grpo over a (1) and c (0): mean 1/2.
    for (const row of res.rows) for (const x of trained(row)) close(x, row.reward - 0.5, row.rolloutId);
    assert.deepEqual(
      res.rows.map((r) => r.rolloutId),
      ["a", "c"],
    );
  });

  test("mask: the cut rollout stays in the group's statistics, none of its tokens is trained (counted overlong_masked)", async () => {
    const res = await groupAdvantages(group(), { estimator: "grpo", overlong: "mask" });
    assert.deepEqual(res.dropped, [{ rolloutId: "b", reason: "overlong_masked" }]);
    assert.equal(res.kept, 3);
    assert.deepEqual(
      res.rows.map((r) => r.rolloutId),
      ["a", "c"],
    );
    // GRPO over all three rewards (1, 0.5, 0): mean 0.5, unbiased std 0.5.
    for (const row of res.rows)
      for (const x of trained(row)) close(x, (row.reward - 0.5) / (0.5 + 1e-6), row.rolloutId, 1e-6);
    const ctx = res.rows[0]!.context;
    assert.deepEqual(ctx.rewards, [1, 0.5, 0]);
    assert.deepEqual(ctx.tokens, [4, 0, 2], "b trains no token (OPO's length and the whitening weight 0)");
    // Tree: b's trajectory still shapes the node values (V(prefix [1, 2]) over a, b, c), its tokens untrained.
    const tree = await groupAdvantages(group(), { estimator: "tree", overlong: "mask" });
    assert.deepEqual(
      tree.rows.map((r) => r.rolloutId),
      ["a", "c"],
    );
  });

  test("penalty: DAPO's soft overlong punishment added to every rollout's reward by its trained tokens", async () => {
    // DAPO eq. 13 / verl's DAPORewardManager: expected = L_max − L_cache; min(−(|y| − expected) / L_cache, 0),
    // and −1 beyond L_max (the paper's third case). L_max 10, L_cache 4: 0 up to 6 tokens, −0.5 at 8, −1 at 12.
    const verl = (len: number, maxLen: number, buffer: number) => Math.min(-(len - (maxLen - buffer)) / buffer, 0);
    for (const len of [0, 5, 6, 7, 8, 9, 10]) close(overlongPenalty(len, 10, 4), verl(len, 10, 4), `|y| = ${len}`);
    close(overlongPenalty(12, 10, 4), -1, "beyond L_max");
    const rollouts = [simple("a", 1, 5 + 2), simple("b", 1, 8 + 2), simple("c", 1, 12 + 2)];
    const res = await groupAdvantages(rollouts, {
      estimator: "dr-grpo",
      overlong: "penalty",
      maxLen: 10,
      overlongBuffer: 4,
    });
    const shaped: Record<string, number> = { a: 1, b: 0.5, c: 0 };
    for (const row of res.rows) {
      assert.equal(row.reward, shaped[row.rolloutId], "the row carries the reward the estimator used");
      for (const x of trained(row)) close(x, shaped[row.rolloutId]! - 0.5, row.rolloutId);
    }
    // A multi-call agent rollout: |y| is every trained token of its trajectories (4 + 2 here = 6: no penalty).
    const agent = await groupAdvantages([pending("a", 1, rowsA, callsA), simple("z", 0, 4)], {
      estimator: "dr-grpo",
      overlong: "penalty",
      maxLen: 10,
      overlongBuffer: 4,
    });
    assert.deepEqual(agent.rows[0]!.context.rewards, [1, 0]);
  });

  test("penalty needs --max-len and a buffer within it; a buffer without penalty is refused", () => {
    assert.match(estimatorSettingsProblem({ estimator: "grpo", overlong: "penalty" }) ?? "", /needs --max-len L_max/);
    assert.match(
      estimatorSettingsProblem({ estimator: "grpo", overlong: "penalty", maxLen: 10, overlongBuffer: 11 }) ?? "",
      /0 < L_cache <= L_max/,
    );
    assert.match(estimatorSettingsProblem({ estimator: "grpo", overlongBuffer: 4 }) ?? "", /needs --overlong penalty/);
    assert.equal(
      estimatorSettingsProblem({ estimator: "grpo", overlong: "penalty", maxLen: 10, overlongBuffer: 4 }),
      null,
    );
  });
});

describe("issue 22: KL in the reward of served batches (--kl-coef, --kl-estimator)", () => {
  // Two groups whole in one batch (--batch-unit group); a has two trajectories.
  const build = async (estimator: "grpo" | "reinforce++") => {
    const g1 = [
      pending("a", 1, [
        { ids: [1, 2, 10, 11, 12], mask: [0, 0, 1, 1, 1] },
        { ids: [1, 2, 10, 13], mask: [0, 0, 0, 1] },
      ]),
      simple("b", 0, 5),
      simple("c", 1, 6),
    ];
    const g2 = [simple("d", 0.5, 4, { groupKey: "group:h#1" }), simple("e", 0, 7, { groupKey: "group:h#1" })];
    const rows = [
      ...(await groupAdvantages(g1, { estimator })).rows,
      ...(await groupAdvantages(g2, { estimator })).rows,
    ];
    return buildBatch(3, rows, { normalize: "none", lossAgg: "token-mean", estimator, batchUnit: "group" });
  };
  const refOf = (b: StoredBatch) => float32s(b.logprobs).map((x, t) => x - 0.05 * ((t % 5) - 1));

  test("grpo, k1: the ref report's reply is GRPO over r − β Σ_t KL_t per rollout (verl's apply_kl_penalty), and ComputeAdvantages agrees", async () => {
    const batch = await build("grpo");
    const beta = 0.3;
    const { client, close: stop } = await serve(batch, {
      klReward: { klCoef: beta, klKind: "k1", estimator: "grpo", normalize: "none", gamma: 1 },
    });
    try {
      const ref = refOf(batch);
      const first = await client.reportLogprobs(3, ref, { kind: "policy" }); // no ref yet: nothing
      assert.equal(first.klAdvantages, null);
      const reply = await client.reportLogprobs(3, ref, { kind: "ref" });
      // The policy's logprobs are the reported ones, here equal to ref's: KL 0 on every token, and the reply is the
      // batch's own advantages.
      const offsets = int32s(batch.offsets);
      const mask = uint8s(batch.lossMask);
      const policy = ref;
      const klSum = new Map<string, number>();
      batch.rowInfo.forEach((r, i) => {
        let s = klSum.get(r.rolloutId) ?? 0;
        for (let t = offsets[i]!; t < offsets[i + 1]!; t++) if (mask[t]) s += policy[t]! - ref[t]!;
        klSum.set(r.rolloutId, s);
      });
      assert.ok([...klSum.values()].every((x) => x === 0));
      assert.deepEqual([...reply.klAdvantages!], [...float32s(batch.advantages)]);

      // Now a policy that differs from ref: the inference server's logprobs (a fresh service, no policy report).
      // Independent: verl's apply_kl_penalty, token_level_rewards = scores − β·(logp − ref)·mask (k1), summed per
      // rollout as compute_grpo_outcome_advantage's token_level_rewards.sum(-1); then GRPO per group by hand.
      const again = await serve(batch, {
        klReward: { klCoef: beta, klKind: "k1", estimator: "grpo", normalize: "none", gamma: 1 },
      });
      try {
        const res = await again.client.reportLogprobs(3, ref, { kind: "ref" });
        const logp = float32s(batch.logprobs);
        const shaped = new Map<string, number>();
        batch.rowInfo.forEach((r, i) => {
          let s = shaped.get(r.rolloutId) ?? r.reward;
          for (let t = offsets[i]!; t < offsets[i + 1]!; t++) if (mask[t]) s -= beta * Math.fround(logp[t]! - ref[t]!);
          shaped.set(r.rolloutId, s);
        });
        const groups: Record<string, string[]> = { "group:g#1": ["a", "b", "c"], "group:h#1": ["d", "e"] };
        const expected = new Map<string, number>();
        for (const ids of Object.values(groups)) {
          const xs = ids.map((id) => shaped.get(id)!);
          const mean = xs.reduce((s, x) => s + x, 0) / xs.length;
          const std = Math.sqrt(xs.reduce((s, x) => s + (x - mean) ** 2, 0) / (xs.length - 1));
          ids.forEach((id, k) => expected.set(id, (xs[k]! - mean) / (std + 1e-6)));
        }
        const got = res.klAdvantages!;
        batch.rowInfo.forEach((r, i) => {
          for (let t = offsets[i]!; t < offsets[i + 1]!; t++)
            close(got[t]!, mask[t] ? expected.get(r.rolloutId)! : 0, `token ${t} (${r.rolloutId})`, 1e-5);
        });
        assert.notDeepEqual([...got], [...float32s(batch.advantages)], "KL moved them");
        // ComputeAdvantages with kl_coef: the same computation.
        const asked = await again.client.computeAdvantages({
          batchId: 3,
          estimator: "grpo",
          klCoef: beta,
          klKind: "k1",
        });
        assert.deepEqual([...asked.advantages], [...got]);
      } finally {
        await again.close();
      }
    } finally {
      await stop();
    }
  });

  test("reinforce++, k3: the reply is the return of −β·k3 per token plus the outcome reward, whitened over the batch", async () => {
    const batch = await build("reinforce++");
    const beta = 0.2;
    const { client, close: stop } = await serve(batch, {
      klReward: { klCoef: beta, klKind: "k3", estimator: "reinforce++", normalize: "none", gamma: 1 },
    });
    try {
      const ref = refOf(batch);
      const res = await client.reportLogprobs(3, ref, { kind: "ref" });
      const offsets = int32s(batch.offsets);
      const mask = uint8s(batch.lossMask);
      const logp = float32s(batch.logprobs);
      // verl's kl_penalty "low_var_kl": kl = ref − logp, clamped to ±20; exp(kl) − kl − 1, clamped to ±10.
      const k3 = (t: number) => {
        const d = Math.max(-20, Math.min(20, ref[t]! - logp[t]!));
        return Math.max(-10, Math.min(10, Math.exp(d) - d - 1));
      };
      // verl's compute_reinforce_plus_plus_outcome_advantage: G_t = r_t + γ G_{t+1} over response tokens; here the
      // outcome reward at each row's last trained token, context tokens skipped (mask 0: no return of their own).
      const returns = new Float32Array(mask.length);
      batch.rowInfo.forEach((r, i) => {
        let last = -1;
        for (let t = offsets[i]!; t < offsets[i + 1]!; t++) if (mask[t]) last = t;
        let g = 0;
        for (let t = offsets[i + 1]! - 1; t >= offsets[i]!; t--) {
          if (!mask[t]) continue;
          g = -beta * k3(t) + (t === last ? r.reward : 0) + g;
          returns[t] = g;
        }
      });
      const expected = maskedWhiten({ offsets, x: returns, mask });
      res.klAdvantages!.forEach((x, t) => close(x, expected[t]!, `token ${t}`, 1e-4));
      const asked = await client.computeAdvantages({
        batchId: 3,
        estimator: "reinforce++",
        klCoef: beta,
        klKind: "k3",
      });
      assert.deepEqual([...asked.advantages], [...res.klAdvantages!]);
    } finally {
      await stop();
    }
  });

  test("outcome estimators need each group whole in the batch; tree and a rollout-unit batch are refused at start", async () => {
    const rows = (await groupAdvantages([simple("a", 1, 4), simple("b", 0, 5)], { estimator: "grpo" })).rows;
    const half = await buildBatch(4, rows.slice(0, 1), { normalize: "none", lossAgg: "token-mean", estimator: "grpo" });
    const { client, close: stop } = await serve(half, {
      klReward: { klCoef: 0.1, klKind: "k1", estimator: "grpo", normalize: "none", gamma: 1 },
    });
    try {
      await assert.rejects(
        client.reportLogprobs(4, float32s(half.logprobs), { kind: "ref" }),
        /INVALID_ARGUMENT.*rollout b of group 'g' is in another batch \(run the core with --batch-unit group\)/,
      );
    } finally {
      await stop();
    }
    assert.match(estimatorSettingsProblem({ estimator: "grpo", klCoef: 0.1 }) ?? "", /needs --batch-unit group/);
    assert.equal(estimatorSettingsProblem({ estimator: "grpo", klCoef: 0.1, batchUnit: "group" }), null);
    assert.equal(estimatorSettingsProblem({ estimator: "reinforce++", klCoef: 0.1 }), null);
    assert.match(estimatorSettingsProblem({ estimator: "tree", klCoef: 0.1, batchUnit: "group" }) ?? "", /not tree/);
  });
});
