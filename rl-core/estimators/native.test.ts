// Every estimator on native kernels against the reference kernels, on seeded random ragged batches, and
// the async (multi-threaded, off the event loop) path against the sync one.
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { kernelsFor } from "../kernels/index.ts";
import { randomBatch, randomForest, seededRandom } from "../kernels/random-batch.ts";
import { assertClose, nativeOrSkip } from "../kernels/test-support.ts";
import {
  computeAdvantages,
  computeAdvantagesAsync,
  type EstimatorSpec,
  type RolloutBatch,
  type TreeSpec,
} from "./index.ts";

const reference = kernelsFor("reference")!;

function outcomeBatch(
  seed: number,
  rows: number,
  minLen: number,
  maxLen: number,
): { batch: RolloutBatch; values: Float32Array; tokenRewards: Float32Array } {
  const b = randomBatch(seed, { rows, minLen, maxLen, groupSize: 6, meanRun: 40, emptyRowRate: 0.05 });
  const rand = seededRandom(seed + 1);
  const dropped = Uint8Array.from({ length: rows }, () => (rand() < 0.1 ? 1 : 0));
  const rewards = Float64Array.from(b.rowRewards, (x, r) => (dropped[r] ? NaN : x));
  const batch: RolloutBatch = {
    offsets: b.offsets,
    lossMask: b.mask,
    rewards,
    groupIds: Int32Array.from(b.groupIds, (g) => g * 3 + 1), // sparse ids
    dropped,
    taskIds: Int32Array.from({ length: rows }, (_, r) => r % 3),
    harnessIds: Int32Array.from({ length: rows }, (_, r) => (r * 7) % 4),
  };
  return { batch, values: b.values, tokenRewards: b.tokenRewards };
}

/** A forest of rollout trees, one row per leaf; a shared segment is trained in the first row only. */
function treeBatch(seed: number): { batch: RolloutBatch; tree: TreeSpec } {
  const rand = seededRandom(seed);
  const { parent, leaves } = randomForest(seed, 160, 12);
  const segLen = Int32Array.from(parent, () => 1 + Math.floor(rand() * 30));
  const offsets = [0];
  const mask: number[] = [];
  const tokenNode: number[] = [];
  const trained = new Uint8Array(parent.length);
  const rootOf = (i: number): number => (parent[i]! < 0 ? i : rootOf(parent[i]!));
  const groupIds: number[] = [];
  for (const leaf of leaves) {
    const path: number[] = [];
    for (let n = leaf; n >= 0; n = parent[n]!) path.unshift(n);
    for (const n of path) {
      for (let k = 0; k < segLen[n]!; k++) {
        tokenNode.push(n);
        mask.push(!trained[n] && rand() < 0.8 ? 1 : 0);
      }
      trained[n] = 1;
    }
    offsets.push(tokenNode.length);
    groupIds.push(rootOf(leaf) % 4); // several rollout trees per group
  }
  const rows = leaves.length;
  const batch: RolloutBatch = {
    offsets: Int32Array.from(offsets),
    lossMask: Uint8Array.from(mask),
    rewards: Float64Array.from({ length: rows }, () => (rand() < 0.5 ? 1 : 0)),
    groupIds: Int32Array.from(groupIds),
    dropped: Uint8Array.from({ length: rows }, () => (rand() < 0.1 ? 1 : 0)),
    taskIds: Int32Array.from({ length: rows }, (_, r) => r % 2),
  };
  return { batch, tree: { parent, tokenNode: Int32Array.from(tokenNode), rowLeaf: leaves } };
}

function specsFor(seed: number, rows: number, minLen: number, maxLen: number): [string, RolloutBatch, EstimatorSpec][] {
  const { batch, values, tokenRewards } = outcomeBatch(seed, rows, minLen, maxLen);
  const t = treeBatch(seed);
  return [
    ["grpo", batch, { estimator: "grpo" }],
    ["grpo (raw singletons, per task)", batch, { estimator: "grpo", singleton: "raw", normalize: "task" }],
    ["dr-grpo (per harness)", batch, { estimator: "dr-grpo", normalize: "harness" }],
    ["rloo (per task and harness)", batch, { estimator: "rloo", normalize: "task-harness" }],
    ["reinforce++-baseline", batch, { estimator: "reinforce++-baseline" }],
    ["opo (whole batch)", batch, { estimator: "opo", normalize: "batch" }],
    ["gae", batch, { estimator: "gae", values, tokenRewards, gamma: 0.99, lambda: 0.95 }],
    ["gae (no whitening)", batch, { estimator: "gae", values, whiten: false }],
    ["tree", t.batch, { estimator: "tree", tree: t.tree }],
    [
      "tree (unscaled, per task)",
      t.batch,
      { estimator: "tree", tree: t.tree, scaleBySqrtLeaves: false, normalize: "task" },
    ],
  ];
}

describe("estimators: native kernels vs reference kernels", () => {
  for (const [seed, rows, minLen, maxLen] of [
    [31, 50, 0, 400],
    [32, 96, 1000, 5000],
  ] as const) {
    test(`every estimator within 1e-5 (${rows} rows, ${minLen}-${maxLen} tokens)`, async (t) => {
      const native = nativeOrSkip(t);
      if (!native) return;
      for (const [label, batch, spec] of specsFor(seed, rows, minLen, maxLen)) {
        const want = computeAdvantages(batch, spec, { kernels: reference });
        const got = computeAdvantages(batch, spec, { kernels: native });
        assert.ok(
          want.advantages.some((x) => x !== 0),
          `${label}: a comparison of all-zero advantages proves nothing`,
        );
        assertClose(got.advantages, want.advantages, `${label}: advantages`);
        if (want.returns) assertClose(got.returns!, want.returns, `${label}: returns`);
        assert.deepEqual(got.lossMask, want.lossMask, `${label}: lossMask`);
        const threaded = await computeAdvantagesAsync(batch, spec, { kernels: native, threads: 4 });
        assertClose(threaded.advantages, got.advantages, `${label}: async vs sync`, 1e-6);
      }
    });
  }
});
