// Hand-computed cases for every kernel, run on each backend available here (reference always; native CPU
// when the addon is built; CUDA where a GPU is visible), plus the errors bad input must raise.
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import {
  KERNEL_NAMES,
  KernelError,
  type KernelInput,
  type KernelName,
  type Kernels,
  type LossAggMode,
} from "./index.ts";
import { randomBatch } from "./random-batch.ts";
import { assertClose, availableBackends } from "./test-support.ts";

const i32 = (...x: number[]) => Int32Array.from(x);
const f32 = (...x: number[]) => Float32Array.from(x);
const f64 = (...x: number[]) => Float64Array.from(x);
const u8 = (...x: number[]) => Uint8Array.from(x);

function rejectsWith(k: Kernels, fn: () => unknown, code: string): void {
  assert.throws(
    fn,
    (err: unknown) => err instanceof KernelError && err.code === code,
    `${k.backend}: expected ${code}`,
  );
}

for (const k of availableBackends()) {
  describe(`kernels (${k.backend})`, () => {
    test("groupStats: mean, unbiased std, weighted mean; id -1 skipped; empty group all zero", () => {
      const s = k.groupStats({
        values: f64(1, 2, 3, 10, 5),
        groupIds: i32(0, 0, 0, 1, -1),
        numGroups: 3,
        weights: f64(1, 1, 2, 3, 1),
      });
      assert.deepEqual([...s.count], [3, 1, 0]);
      assertClose(s.mean, [2, 10, 0], "mean");
      assertClose(s.std, [1, 0, 0], "std");
      assertClose(s.weightedMean, [9 / 4, 10, 0], "weightedMean");
      const unweighted = k.groupStats({ values: f64(1, 2, 3), groupIds: i32(0, 0, 0), numGroups: 1 });
      assertClose(unweighted.weightedMean, [2], "weightedMean = mean without weights");
    });

    test("broadcastRows: row values on mask-1 tokens, empty rows, no mask", () => {
      const offsets = i32(0, 2, 2, 5);
      assertClose(
        k.broadcastRows({ offsets, rowValues: f64(1.5, 9, -2), mask: u8(1, 0, 1, 1, 0) }),
        [1.5, 0, -2, -2, 0],
        "masked",
      );
      assertClose(k.broadcastRows({ offsets, rowValues: f64(1.5, 9, -2) }), [1.5, 1.5, -2, -2, -2], "unmasked");
    });

    test("gatherTokens: index -1 and mask 0 give 0; out-of-range index throws", () => {
      assertClose(
        k.gatherTokens({ values: f64(0.5, -1), index: i32(0, 1, -1, 1), mask: u8(1, 1, 1, 0) }),
        [0.5, -1, 0, 0],
        "gather",
      );
      rejectsWith(k, () => k.gatherTokens({ values: f64(0.5), index: i32(0, 1) }), "RLGATE_KERNEL_BAD_INDEX");
    });

    test("rowCounts", () => {
      assert.deepEqual([...k.rowCounts({ offsets: i32(0, 2, 2, 5), mask: u8(1, 0, 1, 1, 0) })], [1, 0, 2]);
    });

    test("maskedGae: gamma = lambda = 1 gives R - V; context tokens skipped and zeroed", () => {
      const out = k.maskedGae({
        offsets: i32(0, 4),
        rewards: f32(0, 0, 0, 1),
        values: f32(0.5, 0.4, 9, 0.2),
        mask: u8(1, 1, 0, 1),
        gamma: 1,
        lambda: 1,
      });
      assertClose(out.advantages, [0.5, 0.6, 0, 0.8], "advantages");
      assertClose(out.returns, [1, 1, 0, 1], "returns");
    });

    test("maskedGae: discounting skips context tokens and ignores their rewards; rows independent", () => {
      const out = k.maskedGae({
        offsets: i32(0, 3, 3, 4),
        rewards: f32(0, 7, 1, 2),
        values: f32(1, 5, 2, 0.5),
        mask: u8(1, 0, 1, 1),
        gamma: 0.5,
        lambda: 0.5,
      });
      // t=2: delta = 1 - 2 = -1; t=0: delta = 0.5 * 2 - 1 = 0, A = 0 + 0.25 * -1. Row 2: A = 2 - 0.5.
      assertClose(out.advantages, [-0.25, 0, -1, 1.5], "advantages");
      assertClose(out.returns, [0.75, 0, 1, 2], "returns");
    });

    test("maskedGae: row rewards enter at each row's last mask-1 token, added to token rewards; none for rows without one", () => {
      const input = {
        offsets: i32(0, 5, 5, 7),
        rowRewards: f64(1, 3, 2),
        values: f32(0.5, 0.4, 9, 0.2, 7, 1, 1),
        mask: u8(1, 1, 0, 1, 0, 0, 0),
        gamma: 1,
        lambda: 1,
      };
      const out = k.maskedGae(input);
      // Row 0 as in the first GAE test, its reward at t=3 (t=4 is context); row 1 is empty, row 2 all context.
      assertClose(out.advantages, [0.5, 0.6, 0, 0.8, 0, 0, 0], "advantages");
      assertClose(out.returns, [1, 1, 0, 1, 0, 0, 0], "returns");
      const both = k.maskedGae({ ...input, rewards: f32(0, 1, 5, 0.5, 5, 5, 5) });
      // Token rewards 1 (t=1) and 0.5 (t=3) add to everything before them; context tokens' rewards are ignored.
      assertClose(both.advantages, [2, 2.1, 0, 1.3, 0, 0, 0], "advantages with token rewards");
    });

    test("maskedWhiten: unbiased, eps 1e-8, masked tokens zero, segments, shiftMean false", () => {
      const s = 1 / Math.sqrt(1 + 1e-8);
      assertClose(
        k.maskedWhiten({ offsets: i32(0, 4), x: f32(1, 2, 3, 100), mask: u8(1, 1, 1, 0) }),
        [-s, 0, s, 0],
        "batch",
      );
      const seg = k.maskedWhiten({
        offsets: i32(0, 2, 4, 5, 6),
        x: f32(1, 3, 10, 20, 7, 8),
        mask: u8(1, 1, 1, 1, 1, 1),
        rowSegment: i32(0, 1, -1, 2),
        numSegments: 3,
      });
      // segment 0: mean 2, var 2; segment 1: mean 15, var 50; row 2 left out; segment 2: one token -> 0.
      assertClose(seg, [-1 / Math.sqrt(2), 1 / Math.sqrt(2), -5 / Math.sqrt(50), 5 / Math.sqrt(50), 0, 0], "segments");
      const keep = k.maskedWhiten({
        offsets: i32(0, 2),
        x: f32(1, 3),
        mask: u8(1, 1),
        shiftMean: false,
        unbiased: false,
        eps: 0,
      });
      assertClose(keep, [1, 3], "population variance, mean added back");
      assertClose(k.maskedWhiten({ offsets: i32(0, 2), x: f32(1, 3), mask: u8(0, 0) }), [0, 0], "all masked");
    });

    test("treeNodeValues: mean leaf reward per subtree; nodes without leaves 0", () => {
      const out = k.treeNodeValues({
        parent: i32(-1, 0, 0, 1, 1, -1),
        leafNode: i32(3, 4, 2, -1),
        leafReward: f64(1, 0, 1, 99),
      });
      assertClose(out.value, [2 / 3, 0.5, 1, 1, 0, 0], "value");
      assert.deepEqual([...out.leafCount], [3, 2, 1, 1, 1, 0]);
      rejectsWith(
        k,
        () => k.treeNodeValues({ parent: i32(0), leafNode: i32(), leafReward: f64() }),
        "RLGATE_KERNEL_BAD_TREE",
      );
      rejectsWith(
        k,
        () => k.treeNodeValues({ parent: i32(-1), leafNode: i32(1), leafReward: f64(1) }),
        "RLGATE_KERNEL_BAD_INDEX",
      );
    });

    test("importanceWeights: min(exp(old - rollout), cap); mask 0 gives 0", () => {
      const w = k.importanceWeights({
        logpOld: f32(0, -1, 0, 5),
        logpRollout: f32(-1, 0, 0, 0),
        mask: u8(1, 1, 1, 0),
        cap: 2,
      });
      assertClose(w, [2, Math.exp(-1), 1, 0], "weights");
      const uncapped = k.importanceWeights({ logpOld: f32(0), logpRollout: f32(-1), cap: Infinity });
      assertClose(uncapped, [Math.E], "cap Infinity");
    });

    test("klDivergence: k1, k2, k3 (with verl's clamps)", () => {
      const base = { logp: f32(-1, -2, 0, -30), logpRef: f32(-2, -1, 0, 0), mask: u8(1, 1, 0, 1) };
      assertClose(k.klDivergence({ ...base, kind: "k1" }), [1, -1, 0, -30], "k1");
      assertClose(k.klDivergence({ ...base, kind: "k2" }), [0.5, 0.5, 0, 450], "k2");
      // k3 of the last token: d = 30 clamps to 20, exp(20) - 21 clamps to 10.
      assertClose(k.klDivergence({ ...base, kind: "k3" }), [Math.exp(-1), Math.E - 2, 0, 10], "k3");
      rejectsWith(k, () => k.klDivergence({ ...base, kind: "k4" as "k1" }), "RLGATE_KERNEL_BAD_MODE");
    });

    test("lossWeights: per-token weights for each of verl's agg_loss modes", () => {
      const offsets = i32(0, 3, 5, 6);
      const mask = u8(1, 1, 1, 1, 0, 0); // counts 3, 1, 0: the last row is not a counted sequence
      const w = (mode: LossAggMode, extra = {}) => k.lossWeights({ offsets, mask, mode, ...extra });
      assertClose(w("token-mean"), [0.25, 0.25, 0.25, 0.25, 0, 0], "token-mean");
      assertClose(w("seq-mean-token-mean"), [1 / 6, 1 / 6, 1 / 6, 0.5, 0, 0], "seq-mean-token-mean");
      assertClose(w("seq-mean-token-sum"), [0.5, 0.5, 0.5, 0.5, 0, 0], "seq-mean-token-sum");
      assertClose(w("seq-mean-token-sum-norm"), [1 / 3, 1 / 3, 1 / 3, 1 / 3, 0, 0], "seq-mean-token-sum-norm");
      assertClose(w("seq-mean-token-sum-norm", { maxLen: 10 }), [0.1, 0.1, 0.1, 0.1, 0, 0], "maxLen");
      assertClose(w("token-mean", { totalTokens: 8 }), [0.125, 0.125, 0.125, 0.125, 0, 0], "totalTokens");
      assertClose(w("seq-mean-token-sum", { totalSeqs: 4 }), [0.25, 0.25, 0.25, 0.25, 0, 0], "totalSeqs");
      assertClose(
        k.lossWeights({ offsets, mask: u8(0, 0, 0, 0, 0, 0), mode: "token-mean" }),
        [0, 0, 0, 0, 0, 0],
        "all masked",
      );
    });

    test("lossWeights: sum(w * loss) equals the aggregated loss computed from its definition", () => {
      const offsets = i32(0, 4, 5, 9);
      const mask = u8(1, 0, 1, 1, 1, 0, 1, 1, 1);
      const loss = [0.3, 5, -1.2, 2, 0.7, 9, 1, 1.5, -0.5];
      const rows = [
        [0, 4],
        [4, 5],
        [5, 9],
      ] as const;
      const sums = rows.map(([b, e]) => loss.slice(b, e).reduce((s, x, i) => s + (mask[b + i] ? x : 0), 0));
      const counts = rows.map(([b, e]) => [...mask.slice(b, e)].reduce((s, m) => s + m, 0));
      const expected: Record<LossAggMode, number> = {
        "token-mean": sums.reduce((a, b) => a + b) / counts.reduce((a, b) => a + b),
        "seq-mean-token-mean": sums.reduce((a, s, r) => a + s / counts[r]!, 0) / 3,
        "seq-mean-token-sum": sums.reduce((a, b) => a + b) / 3,
        "seq-mean-token-sum-norm": sums.reduce((a, b) => a + b) / Math.max(...counts),
      };
      for (const mode of Object.keys(expected) as LossAggMode[]) {
        const w = k.lossWeights({ offsets, mask, mode });
        const total = loss.reduce((s, x, t) => s + w[t]! * x, 0);
        assertClose([total], [expected[mode]], mode);
      }
    });

    test("empty batch: every kernel returns empty outputs", () => {
      const offsets = i32(0);
      const none = { offsets, mask: u8() };
      assert.equal(k.broadcastRows({ offsets, rowValues: f64() }).length, 0);
      assert.equal(k.rowCounts(none).length, 0);
      assert.equal(
        k.maskedGae({ offsets, rewards: f32(), values: f32(), mask: u8(), gamma: 1, lambda: 1 }).advantages.length,
        0,
      );
      assert.equal(k.maskedWhiten({ offsets, x: f32(), mask: u8() }).length, 0);
      assert.equal(k.lossWeights({ ...none, mode: "seq-mean-token-mean" }).length, 0);
      assert.equal(k.groupStats({ values: f64(), groupIds: i32(), numGroups: 0 }).mean.length, 0);
      assert.equal(k.treeNodeValues({ parent: i32(), leafNode: i32(), leafReward: f64() }).value.length, 0);
      assert.equal(k.importanceWeights({ logpOld: f32(), logpRollout: f32(), cap: 2 }).length, 0);
      assert.equal(k.klDivergence({ logp: f32(), logpRef: f32(), kind: "k3" }).length, 0);
    });

    test("out: caller buffers (full of garbage) end up exactly like fresh outputs; overlap refused", async () => {
      const b = randomBatch(5, { rows: 9, minLen: 0, maxLen: 60, meanRun: 4, emptyRowRate: 0.2 });
      const rows = b.offsets.length - 1;
      const inputs: { [K in KernelName]: KernelInput<K> } = {
        groupStats: {
          values: b.rowRewards,
          groupIds: Int32Array.from(b.groupIds, (g, r) => (r === 3 ? -1 : g)),
          numGroups: b.numGroups + 1,
        },
        broadcastRows: { offsets: b.offsets, rowValues: b.rowRewards, mask: b.mask },
        gatherTokens: { values: f64(1, 2, 3), index: Int32Array.from(b.mask, (_, t) => (t % 4) - 1), mask: b.mask },
        rowCounts: { offsets: b.offsets, mask: b.mask },
        maskedGae: {
          offsets: b.offsets,
          rewards: b.tokenRewards,
          rowRewards: b.rowRewards,
          values: b.values,
          mask: b.mask,
          gamma: 0.9,
          lambda: 0.8,
        },
        maskedWhiten: {
          offsets: b.offsets,
          x: b.values,
          mask: b.mask,
          rowSegment: Int32Array.from({ length: rows }, (_, r) => (r % 3) - 1),
          numSegments: 2,
        },
        treeNodeValues: { parent: i32(-1, 0, 0, 1), leafNode: i32(3, 2, -1), leafReward: f64(1, 0, 5) },
        importanceWeights: { logpOld: b.logpOld, logpRollout: b.logpRollout, mask: b.mask, cap: 1.02 },
        klDivergence: { logp: b.logpOld, logpRef: b.logpRef, mask: b.mask, kind: "k3" },
        lossWeights: { offsets: b.offsets, mask: b.mask, mode: "seq-mean-token-mean" },
      };
      const garbage = (x: unknown): unknown => {
        if (ArrayBuffer.isView(x)) {
          const copy: unknown = (x as Float32Array).slice();
          (copy as Float32Array).fill(copy instanceof Float32Array || copy instanceof Float64Array ? NaN : 77);
          return copy;
        }
        return Object.fromEntries(Object.entries(x as object).map(([key, v]) => [key, garbage(v)]));
      };
      for (const name of KERNEL_NAMES) {
        const run = k[name] as (i: unknown, o?: { out?: unknown }) => unknown;
        const fresh = run(inputs[name]);
        const out = garbage(fresh);
        assert.equal(run(inputs[name], { out }), out, `${name} returns the given out`);
        assert.deepEqual(out, fresh, `${name} with a reused buffer`);
        const again = garbage(fresh);
        assert.equal(
          await (k[`${name}Async`] as (i: unknown, o?: { out?: unknown }) => Promise<unknown>)(inputs[name], {
            out: again,
          }),
          again,
        );
        assert.deepEqual(again, fresh, `${name}Async with a reused buffer`);
      }
      const w = inputs.maskedWhiten;
      rejectsWith(k, () => k.maskedWhiten(w, { out: w.x }), "RLGATE_KERNEL_BAD_ARGUMENT");
      rejectsWith(k, () => k.maskedWhiten(w, { out: new Float32Array(w.x.length + 1) }), "RLGATE_KERNEL_BAD_ARGUMENT");
      const shared = new Float32Array(2 * b.values.length);
      rejectsWith(
        k,
        () =>
          k.maskedGae(inputs.maskedGae, {
            out: { advantages: shared.subarray(0, b.values.length), returns: shared.subarray(1, b.values.length + 1) },
          }),
        "RLGATE_KERNEL_BAD_ARGUMENT",
      );
    });

    test("bad input raises the same coded errors on every backend", async () => {
      rejectsWith(k, () => k.rowCounts({ offsets: i32(0, 3, 2), mask: u8(1, 1) }), "RLGATE_KERNEL_BAD_OFFSETS");
      rejectsWith(k, () => k.rowCounts({ offsets: i32(1, 2), mask: u8(1, 1) }), "RLGATE_KERNEL_BAD_OFFSETS");
      rejectsWith(k, () => k.rowCounts({ offsets: i32(0, 2), mask: u8(1) }), "RLGATE_KERNEL_BAD_ARGUMENT");
      rejectsWith(
        k,
        () => k.rowCounts({ offsets: i32(0, 2), mask: f32(1, 1) as unknown as Uint8Array }),
        "RLGATE_KERNEL_BAD_ARGUMENT",
      );
      rejectsWith(k, () => k.groupStats({ values: f64(1), groupIds: i32(2), numGroups: 2 }), "RLGATE_KERNEL_BAD_INDEX");
      rejectsWith(
        k,
        () => k.importanceWeights({ logpOld: f32(0), logpRollout: f32(0), cap: 0 }),
        "RLGATE_KERNEL_BAD_ARGUMENT",
      );
      rejectsWith(
        k,
        () => k.maskedWhiten({ offsets: i32(0, 1), x: f32(1), mask: u8(1), rowSegment: i32(1), numSegments: 1 }),
        "RLGATE_KERNEL_BAD_INDEX",
      );
      rejectsWith(
        k,
        () => k.lossWeights({ offsets: i32(0), mask: u8(), mode: "sum" as LossAggMode }),
        "RLGATE_KERNEL_BAD_MODE",
      );
      await assert.rejects(
        k.rowCountsAsync({ offsets: i32(0, 3, 2), mask: u8(1, 1) }),
        (err: unknown) => err instanceof KernelError && err.code === "RLGATE_KERNEL_BAD_OFFSETS",
      );
    });
  });
}
