// CUDA kernels against the TypeScript reference. They run where a GPU is visible and skip elsewhere with
// "no CUDA device: <why>" (RLGATE_REQUIRE_CUDA=1, set by native/cuda/gpu-check.sh, turns the skip into a
// failure). Run on a GPU machine with: bash native/cuda/gpu-check.sh
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { KernelError, kernelsFor, type LossAggMode } from "./index.ts";
import { randomBatch } from "./random-batch.ts";
import { assertClose, cudaOrSkip } from "./test-support.ts";

const reference = kernelsFor("reference")!;

const SHAPES = [
  { name: "small ragged, empty rows", seed: 21, rows: 37, minLen: 0, maxLen: 700, emptyRowRate: 0.15, meanRun: 9 },
  { name: "one long row (many GAE chunks)", seed: 22, rows: 1, minLen: 300000, maxLen: 300000, meanRun: 50 },
  { name: "256 rows x 1k-4k", seed: 23, rows: 256, minLen: 1000, maxLen: 4000, meanRun: 120 },
];

describe("CUDA kernels vs the TypeScript reference", () => {
  for (const shape of SHAPES) {
    test(`token kernels within 1e-5: ${shape.name}`, async (t) => {
      const cuda = cudaOrSkip(t);
      if (!cuda) return;
      const b = randomBatch(shape.seed, shape);
      const rows = b.offsets.length - 1;
      const rowValues = Float64Array.from({ length: rows }, (_, r) => Math.sin(r));
      const index = Int32Array.from(b.mask, (_, t2) => (t2 % 13) - 1);
      const nodeValues = Float64Array.from({ length: 12 }, (_, i) => i * 0.5 - 2);
      const segments = Int32Array.from({ length: rows }, (_, r) => (r % 4) - 1);
      const cases: [string, (k: typeof reference) => Promise<ArrayLike<number>>][] = [
        ["broadcastRows", (k) => k.broadcastRowsAsync({ offsets: b.offsets, rowValues, mask: b.mask })],
        ["gatherTokens", (k) => k.gatherTokensAsync({ values: nodeValues, index, mask: b.mask })],
        ["rowCounts", (k) => k.rowCountsAsync({ offsets: b.offsets, mask: b.mask })],
        [
          "maskedGae.advantages",
          async (k) =>
            (
              await k.maskedGaeAsync({
                offsets: b.offsets,
                rewards: b.tokenRewards,
                values: b.values,
                mask: b.mask,
                gamma: 0.99,
                lambda: 0.95,
              })
            ).advantages,
        ],
        [
          "maskedGae.returns",
          async (k) =>
            (
              await k.maskedGaeAsync({
                offsets: b.offsets,
                rewards: b.tokenRewards,
                values: b.values,
                mask: b.mask,
                gamma: 1,
                lambda: 1,
              })
            ).returns,
        ],
        [
          "maskedGae(rowRewards)",
          async (k) =>
            (
              await k.maskedGaeAsync({
                offsets: b.offsets,
                rewards: b.tokenRewards,
                rowRewards: rowValues,
                values: b.values,
                mask: b.mask,
                gamma: 0.99,
                lambda: 0.95,
              })
            ).advantages,
        ],
        ["maskedWhiten", (k) => k.maskedWhitenAsync({ offsets: b.offsets, x: b.values, mask: b.mask })],
        [
          "maskedWhiten(segments)",
          (k) =>
            k.maskedWhitenAsync({
              offsets: b.offsets,
              x: b.values,
              mask: b.mask,
              rowSegment: segments,
              numSegments: 3,
            }),
        ],
        [
          "importanceWeights",
          (k) => k.importanceWeightsAsync({ logpOld: b.logpOld, logpRollout: b.logpRollout, mask: b.mask, cap: 1.05 }),
        ],
        [
          "klDivergence.k3",
          (k) => k.klDivergenceAsync({ logp: b.logpOld, logpRef: b.logpRef, mask: b.mask, kind: "k3" }),
        ],
        ["klDivergence.k2", (k) => k.klDivergenceAsync({ logp: b.logpOld, logpRef: b.logpRef, kind: "k2" })],
      ];
      for (const mode of [
        "token-mean",
        "seq-mean-token-mean",
        "seq-mean-token-sum",
        "seq-mean-token-sum-norm",
      ] as LossAggMode[]) {
        cases.push([`lossWeights.${mode}`, (k) => k.lossWeightsAsync({ offsets: b.offsets, mask: b.mask, mode })]);
      }
      for (const [label, run] of cases) assertClose(await run(cuda), await run(reference), `cuda ${label}`);
      // The sync entry points take the same CUDA path.
      assertClose(
        cuda.broadcastRows({ offsets: b.offsets, rowValues, mask: b.mask }),
        await cases[0]![1](reference),
        "sync broadcastRows",
      );
    });
  }

  test("concurrent async calls of different kernels each equal the reference", async (t) => {
    const cuda = cudaOrSkip(t);
    if (!cuda) return;
    const b = randomBatch(25, { rows: 40, minLen: 0, maxLen: 3000, emptyRowRate: 0.1, meanRun: 30 });
    const gae = {
      offsets: b.offsets,
      rewards: b.tokenRewards,
      rowRewards: b.rowRewards,
      values: b.values,
      mask: b.mask,
      gamma: 0.99,
      lambda: 0.95,
    };
    const whiten = { offsets: b.offsets, x: b.values, mask: b.mask };
    const counts = { offsets: b.offsets, mask: b.mask };
    const runs = Array.from({ length: 8 }, () =>
      Promise.all([cuda.maskedGaeAsync(gae), cuda.maskedWhitenAsync(whiten), cuda.rowCountsAsync(counts)]),
    );
    const wantGae = reference.maskedGae(gae).advantages;
    const wantWhiten = reference.maskedWhiten(whiten);
    const wantCounts = reference.rowCounts(counts);
    for (const [g, w, c] of await Promise.all(runs)) {
      assertClose(g.advantages, wantGae, "concurrent maskedGae");
      assertClose(w, wantWhiten, "concurrent maskedWhiten");
      assert.deepEqual([...c], [...wantCounts], "concurrent rowCounts");
    }
  });

  test("an out-of-range gather index is caught on the device", async (t) => {
    const cuda = cudaOrSkip(t);
    if (!cuda) return;
    await assert.rejects(
      cuda.gatherTokensAsync({ values: Float64Array.of(1), index: Int32Array.of(0, 3) }),
      (err: unknown) => err instanceof KernelError && err.code === "RLGATE_KERNEL_BAD_INDEX",
    );
  });
});
