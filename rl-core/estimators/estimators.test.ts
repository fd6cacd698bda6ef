// Hand-computed cases for every estimator and edge case, run on each kernel backend available here.
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { randomBatch } from "../kernels/random-batch.ts";
import { assertClose, availableBackends } from "../kernels/test-support.ts";
import {
  computeAdvantages,
  computeAdvantagesAsync,
  EstimatorError,
  normalizeAdvantages,
  type RolloutBatch,
  type TreeSpec,
} from "./index.ts";

const i32 = (...x: number[]) => Int32Array.from(x);
const f32 = (...x: number[]) => Float32Array.from(x);
const f64 = (...x: number[]) => Float64Array.from(x);
const u8 = (...x: number[]) => Uint8Array.from(x);

// Eight rows of 3 tokens, mask [0, 1, 1] (a context token, then two sampled ones), except row 2 (nothing
// trained). Group A: rows 0-4, rewards 1, 0, 0, 1 and row 4 an infra_error; group B: row 5 alone;
// group C: rows 6-7 with equal rewards.
function outcomeBatch(): RolloutBatch {
  const rows = 8;
  const offsets = Int32Array.from({ length: rows + 1 }, (_, r) => 3 * r);
  const lossMask = new Uint8Array(3 * rows);
  for (let r = 0; r < rows; r++) if (r !== 2) lossMask.set([0, 1, 1], 3 * r);
  return {
    offsets,
    lossMask,
    rewards: f64(1, 0, 0, 1, NaN, 1, 0.7, 0.7),
    groupIds: i32(10, 10, 10, 10, 10, 20, 30, 30),
    dropped: u8(0, 0, 0, 0, 1, 0, 0, 0),
    taskIds: i32(1, 1, 1, 1, 1, 2, 2, 2),
    harnessIds: i32(7, 8, 7, 8, 7, 7, 8, 8),
  };
}

/** Token advantages expected from per-row advantages under outcomeBatch's mask. */
function tokensOf(rowAdvantages: number[]): number[] {
  return rowAdvantages.flatMap((a, r) => (r === 2 ? [0, 0, 0] : [0, a, a]));
}

/** Node 0 (trunk) -> 1 -> {3, 4}; 0 -> 2. Leaves: row 0 at 3 (r=1), row 1 at 4 (r=0), row 2 at 2 (r=1). */
function branchedGroup(): { batch: RolloutBatch; tree: TreeSpec } {
  const batch: RolloutBatch = {
    offsets: i32(0, 4, 8, 11),
    lossMask: u8(0, 1, 1, 1, 0, 0, 0, 1, 0, 0, 1),
    rewards: f64(1, 0, 1),
    groupIds: i32(0, 0, 0),
  };
  const tree = {
    parent: i32(-1, 0, 0, 1, 1),
    tokenNode: i32(0, 0, 1, 3, 0, 0, 1, 4, 0, 0, 2),
    rowLeaf: i32(3, 4, 2),
  };
  return { batch, tree };
}

/** Two rollouts sharing no token, each a chain of two nodes (segments split at a call boundary): 0 -> 1, 2 -> 3. */
function flatGroup(): { batch: RolloutBatch; tree: TreeSpec } {
  const batch: RolloutBatch = {
    offsets: i32(0, 4, 8),
    lossMask: u8(0, 1, 0, 1, 0, 1, 0, 1),
    rewards: f64(1, 0),
    groupIds: i32(5, 5),
  };
  return { batch, tree: { parent: i32(-1, 0, -1, 2), tokenNode: i32(0, 0, 1, 1, 2, 2, 3, 3), rowLeaf: i32(1, 3) } };
}

const STD_A = Math.sqrt(1 / 3); // unbiased std of 1, 0, 0, 1

for (const kernels of availableBackends()) {
  const run = (batch: RolloutBatch, spec: Parameters<typeof computeAdvantages>[1]) =>
    computeAdvantages(batch, spec, { kernels });

  describe(`estimators (${kernels.backend})`, () => {
    test("GRPO: (r - mean) / (std + 1e-6); singleton 0; equal rewards 0; infra_error dropped", () => {
      const out = run(outcomeBatch(), { estimator: "grpo" });
      const a = 0.5 / (STD_A + 1e-6);
      assertClose(out.rowAdvantages!, [a, -a, -a, a, 0, 0, 0, 0], "rows");
      assertClose(out.advantages, tokensOf([a, -a, -a, a, 0, 0, 0, 0]), "tokens");
      assert.deepEqual([...out.lossMask.subarray(12, 15)], [0, 0, 0], "dropped row gets no loss weight");
      assert.deepEqual([...out.lossMask.subarray(0, 3)], [0, 1, 1]);
    });

    test("GRPO with singleton 'raw' gives verl's r / (1 + eps); custom eps", () => {
      const out = run(outcomeBatch(), { estimator: "grpo", singleton: "raw", eps: 0.5 });
      const a = 0.5 / (STD_A + 0.5);
      assertClose(out.rowAdvantages!, [a, -a, -a, a, 0, 1 / 1.5, 0, 0], "rows");
    });

    test("Dr.GRPO: r - mean, no std", () => {
      assertClose(
        run(outcomeBatch(), { estimator: "dr-grpo" }).advantages,
        tokensOf([0.5, -0.5, -0.5, 0.5, 0, 0, 0, 0]),
        "tokens",
      );
    });

    test("RLOO: r minus the mean of the others", () => {
      const out = run(outcomeBatch(), { estimator: "rloo" });
      assertClose(out.rowAdvantages!, [1 - 1 / 3, 0 - 2 / 3, 0 - 2 / 3, 1 - 1 / 3, 0, 0, 0, 0], "rows");
    });

    test("OPO: baseline weighted by trained-token counts", () => {
      // Group A lengths 2, 2, 0, 2: baseline (2 + 0 + 0 + 2) / 6.
      const b = 4 / 6;
      assertClose(run(outcomeBatch(), { estimator: "opo" }).rowAdvantages!, [1 - b, -b, -b, 1 - b, 0, 0, 0, 0], "rows");
    });

    test("REINFORCE++-baseline: group-mean baseline, then whitening over the batch's trained tokens", () => {
      const out = run(outcomeBatch(), { estimator: "reinforce++-baseline" });
      // Trained tokens of rows with a baseline (0, 1, 3, 6, 7), two each; the singleton row 5 stays 0.
      const x = [0.5, 0.5, -0.5, -0.5, 0.5, 0.5, 0, 0, 0, 0];
      const mean = x.reduce((s, v) => s + v) / x.length;
      const std = Math.sqrt(x.reduce((s, v) => s + (v - mean) ** 2, 0) / (x.length - 1) + 1e-8);
      const w = (v: number) => (v - mean) / std;
      assertClose(out.advantages, tokensOf([w(0.5), w(-0.5), 0, w(0.5), 0, 0, w(0), w(0)]), "tokens");
    });

    test("normalize by task / harness: each segment's trained tokens end with mean 0 and std 1; no signal stays 0", () => {
      const batch = outcomeBatch();
      for (const by of ["batch", "task", "harness", "task-harness"] as const) {
        const out = run(batch, { estimator: "dr-grpo", normalize: by });
        // Row 5 is alone in its group, rows 6-7 have equal rewards: no signal, and normalizing gives them none.
        assert.deepEqual([...out.advantages.subarray(15, 24)], [0, 0, 0, 0, 0, 0, 0, 0, 0], `${by}: no signal stays 0`);
        assert.deepEqual([...out.noSignal!], [0, 0, 0, 0, 0, 1, 1, 1]);
        const seg = (r: number) =>
          by === "batch"
            ? "*"
            : by === "task"
              ? `${batch.taskIds![r]}`
              : by === "harness"
                ? `${batch.harnessIds![r]}`
                : `${batch.taskIds![r]}/${batch.harnessIds![r]}`;
        const groups = new Map<string, number[]>();
        for (let r = 0; r < 5; r++) {
          for (let t = 3 * r; t < 3 * r + 3; t++)
            if (out.lossMask[t]) groups.set(seg(r), [...(groups.get(seg(r)) ?? []), out.advantages[t]!]);
        }
        for (const [key, xs] of groups) {
          const mean = xs.reduce((s, v) => s + v) / xs.length;
          assert.ok(Math.abs(mean) < 1e-6, `${by} ${key}: mean ${mean}`);
          const varU = xs.reduce((s, v) => s + (v - mean) ** 2, 0) / (xs.length - 1);
          if (varU > 1e-6) assert.ok(Math.abs(varU - 1) < 1e-4, `${by} ${key}: var ${varU}`);
        }
      }
      const plain = run(batch, { estimator: "dr-grpo" }).advantages;
      const noSignal = u8(0, 0, 0, 0, 0, 1, 1, 1);
      assertClose(
        normalizeAdvantages({ ...batch, noSignal }, plain, "task", { kernels }),
        run(batch, { estimator: "dr-grpo", normalize: "task" }).advantages,
        "normalizeAdvantages",
      );
    });

    test("outcome whitening on row values equals maskedWhiten over the broadcast tokens (random ragged batch)", () => {
      const b = randomBatch(5, { rows: 61, minLen: 0, maxLen: 300, meanRun: 20, groupSize: 4, emptyRowRate: 0.1 });
      const rows = b.offsets.length - 1;
      const batch: RolloutBatch = {
        offsets: b.offsets,
        lossMask: b.mask,
        rewards: b.rowRewards,
        groupIds: b.groupIds.map((g, r) => (r % 9 === 0 ? 1000 + r : g)), // some groups of one
        taskIds: Int32Array.from({ length: rows }, (_, r) => r % 3),
      };
      for (const normalize of ["none", "batch", "task"] as const) {
        const out = run(batch, { estimator: "reinforce++-baseline", normalize });
        // The token-level way: broadcast, whiten (rows without a baseline left out), then normalize.
        const size = new Map<number, number>();
        for (const g of batch.groupIds!) size.set(g, (size.get(g) ?? 0) + 1);
        const segment = Int32Array.from(batch.groupIds!, (g) => (size.get(g) === 1 ? -1 : 0));
        let tokens = kernels.broadcastRows({ offsets: b.offsets, rowValues: out.rowAdvantages!, mask: b.mask });
        tokens = kernels.maskedWhiten({
          offsets: b.offsets,
          x: tokens,
          mask: b.mask,
          rowSegment: segment,
          numSegments: 1,
        });
        // normalize leaves rows without a baseline at 0 (noSignal): here the groups of one.
        if (normalize !== "none")
          tokens = normalizeAdvantages(
            { ...batch, noSignal: Uint8Array.from(segment, (s) => (s < 0 ? 1 : 0)) },
            tokens,
            normalize,
            { kernels },
          );
        assertClose(out.advantages, tokens, `reinforce++-baseline, normalize ${normalize}`);
      }
    });

    test("GAE: outcome reward at the last trained token, context skipped, whitening optional", () => {
      const batch: RolloutBatch = { offsets: i32(0, 4, 6), lossMask: u8(1, 1, 0, 1, 0, 0), rewards: f64(1, 5) };
      const values = f32(0.5, 0.4, 9, 0.2, 1, 1);
      const raw = run(batch, { estimator: "gae", values, whiten: false });
      assertClose(raw.advantages, [0.5, 0.6, 0, 0.8, 0, 0], "advantages (R - V)");
      assertClose(raw.returns!, [1, 1, 0, 1, 0, 0], "returns");
      const whitened = run(batch, { estimator: "gae", values });
      const m = (0.5 + 0.6 + 0.8) / 3;
      const s = Math.sqrt(((0.5 - m) ** 2 + (0.6 - m) ** 2 + (0.8 - m) ** 2) / 2 + 1e-8);
      assertClose(whitened.advantages, [(0.5 - m) / s, (0.6 - m) / s, 0, (0.8 - m) / s, 0, 0], "whitened");
      const discounted = run(batch, {
        estimator: "gae",
        values,
        tokenRewards: f32(0, 0, 0, 0.5, 0, 0),
        gamma: 0.5,
        lambda: 0.5,
        whiten: false,
      });
      // r_3 = 0.5 + 1; delta_3 = 1.5 - 0.2; delta_1 = 0.5*0.2 - 0.4; delta_0 = 0.5*0.4 - 0.5.
      const a3 = 1.3;
      const a1 = -0.3 + 0.25 * a3;
      assertClose(discounted.advantages, [-0.3 + 0.25 * a1, a1, 0, a3, 0, 0], "gamma, lambda, token rewards");
    });

    test("GAE: an infra_error row is dropped", () => {
      const batch: RolloutBatch = {
        offsets: i32(0, 2, 4),
        lossMask: u8(1, 1, 1, 1),
        rewards: f64(1, NaN),
        dropped: u8(0, 1),
      };
      const out = run(batch, { estimator: "gae", values: f32(0, 0, 3, 3), whiten: false });
      assertClose(out.advantages, [1, 1, 0, 0], "advantages");
      assert.deepEqual([...out.lossMask], [1, 1, 0, 0]);
    });

    test("tree: TreeRL's (global + local) / sqrt(leaves) per segment; shared tokens trained once", () => {
      const { batch, tree } = branchedGroup();
      const out = run(batch, { estimator: "tree", tree });
      const root = 2 / 3;
      const a1 = (0.5 - root + (0.5 - root)) / Math.SQRT2;
      const a2 = 1 - root + (1 - root);
      const a3 = 1 - root + (1 - 0.5);
      const a4 = 0 - root + (0 - 0.5);
      assertClose(out.advantages, [0, 0, a1, a3, 0, 0, 0, a4, 0, 0, a2], "tokens");
      const flat = run(batch, { estimator: "tree", tree, scaleBySqrtLeaves: false });
      assertClose([flat.advantages[2]!], [a1 * Math.SQRT2], "unscaled");
    });

    test("tree: without branching (segments split at call boundaries) it is twice Dr.GRPO", () => {
      const { batch, tree } = flatGroup();
      assertClose(run(batch, { estimator: "tree", tree }).advantages, [0, 1, 0, 1, 0, -1, 0, -1], "tokens");
    });

    test("branch-grpo: each segment against the rollouts at the branch point it leaves, GRPO-normalized", () => {
      const { batch, tree } = branchedGroup();
      const eps = 1e-6;
      const top = Math.sqrt(1 / 3) + eps; // rewards 1, 0, 1 at the trunk: mean 2/3, unbiased std sqrt(1/3)
      const split = Math.SQRT1_2 + eps; // rewards 1, 0 at node 1
      const out = run(batch, { estimator: "branch-grpo", tree });
      const a1 = (0.5 - 2 / 3) / top;
      const a2 = (1 - 2 / 3) / top;
      assertClose(out.advantages, [0, 0, a1, 0.5 / split, 0, 0, 0, -0.5 / split, 0, 0, a2], "tokens");
    });

    test("branch-grpo: large rewards give the advantages of their differences (variance not lost to cancellation)", () => {
      const { batch, tree } = branchedGroup();
      const small = run(batch, { estimator: "branch-grpo", tree }).advantages;
      const large = run({ ...batch, rewards: f64(1e8 + 1, 1e8, 1e8 + 1) }, { estimator: "branch-grpo", tree });
      assertClose(large.advantages, [...small], "tokens");
    });

    test("branch-grpo: without branching it is GRPO", () => {
      const { batch, tree } = flatGroup();
      const grpo = run({ ...batch, offsets: i32(0, 4, 8) }, { estimator: "grpo" }).advantages;
      assertClose(run(batch, { estimator: "branch-grpo", tree }).advantages, [...grpo], "tokens");
    });

    test("tree: rows of two groups under one root are refused", () => {
      const batch: RolloutBatch = {
        offsets: i32(0, 1, 2),
        lossMask: u8(1, 1),
        rewards: f64(1, 0),
        groupIds: i32(0, 1),
      };
      const tree = { parent: i32(-1, 0, 0), tokenNode: i32(1, 2), rowLeaf: i32(1, 2) };
      assert.throws(() => run(batch, { estimator: "tree", tree }), EstimatorError);
    });

    test("edge cases: empty batch, all tokens masked, missing groups, bad rewards", async () => {
      const empty: RolloutBatch = { offsets: i32(0), lossMask: u8(), rewards: f64(), groupIds: i32() };
      for (const estimator of ["grpo", "dr-grpo", "rloo", "reinforce++-baseline", "opo"] as const) {
        assert.equal(run(empty, { estimator }).advantages.length, 0, estimator);
        assert.equal(
          (await computeAdvantagesAsync(empty, { estimator, normalize: "batch" }, { kernels })).advantages.length,
          0,
        );
      }
      assert.equal(run(empty, { estimator: "gae", values: f32() }).advantages.length, 0);
      assert.equal(
        run(empty, { estimator: "tree", tree: { parent: i32(), tokenNode: i32(), rowLeaf: i32() } }).advantages.length,
        0,
      );

      const masked: RolloutBatch = {
        offsets: i32(0, 2, 4),
        lossMask: u8(0, 0, 0, 0),
        rewards: f64(1, 0),
        groupIds: i32(0, 0),
      };
      for (const estimator of ["grpo", "rloo", "reinforce++-baseline", "opo"] as const) {
        assertClose(
          run(masked, { estimator, normalize: "batch" }).advantages,
          [0, 0, 0, 0],
          `${estimator}, all masked`,
        );
      }
      assertClose(
        run(masked, { estimator: "gae", values: f32(1, 2, 3, 4) }).advantages,
        [0, 0, 0, 0],
        "gae, all masked",
      );

      assert.throws(() => run({ ...masked, groupIds: undefined }, { estimator: "grpo" }), EstimatorError);
      assert.throws(() => run({ ...masked, rewards: f64(1, NaN) }, { estimator: "grpo" }), /row 1 has reward NaN/);
      assert.throws(() => run(masked, { estimator: "grpo", normalize: "harness" }), /harnessIds/);
      // A negative group id means "not grouped": dropped like infra_error.
      const ungrouped = run({ ...masked, lossMask: u8(1, 1, 1, 1), groupIds: i32(0, -1) }, { estimator: "dr-grpo" });
      assert.deepEqual([...ungrouped.lossMask], [1, 1, 0, 0]);
    });
  });
}
