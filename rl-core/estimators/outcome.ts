// Outcome-reward estimators with a group baseline: GRPO, Dr.GRPO, RLOO, REINFORCE++-baseline, OPO.
// One advantage per row, broadcast to the row's mask-1 tokens. Definitions and edge cases: README.md.
import { prepareBatch } from "./batch.ts";
import { normalizeSteps } from "./normalize.ts";
import { call, type Steps } from "./steps.ts";
import type { AdvantageResult, EstimatorSpec, RolloutBatch } from "./types.ts";

export type OutcomeSpec = Extract<EstimatorSpec, { estimator: "grpo" | "dr-grpo" | "rloo" | "reinforce++-baseline" | "opo" }>;

export const GRPO_EPS = 1e-6;

export function* outcomeSteps(batch: RolloutBatch, spec: OutcomeSpec): Steps<AdvantageResult> {
  const name = spec.estimator;
  const p = prepareBatch(name, batch, true);
  const groupIds = p.groupIds!;
  let weights: Float64Array | null = null;
  if (name === "opo") {
    // OPO's length-weighted baseline: lengths are the rows' trained (mask-1) token counts.
    const counts = yield* call("rowCounts", { offsets: p.offsets, mask: p.lossMask });
    weights = Float64Array.from(counts);
  }
  const stats = yield* call("groupStats", { values: batch.rewards, groupIds, numGroups: p.numGroups, weights });
  const eps = spec.estimator === "grpo" ? spec.eps ?? GRPO_EPS : GRPO_EPS;
  const raw = spec.singleton === "raw";
  const rowAdvantages = new Float64Array(p.rows);
  // REINFORCE++-baseline whitens over the batch; rows without a baseline (singletons) stay out of it.
  const whitenSegment = name === "reinforce++-baseline" ? new Int32Array(p.rows).fill(-1) : null;
  for (let r = 0; r < p.rows; r++) {
    const g = groupIds[r]!;
    if (g < 0) continue;
    const x = batch.rewards[r]!;
    const n = stats.count[g]!;
    const mean = stats.mean[g]!;
    if (n === 1) {
      if (raw) {
        rowAdvantages[r] = name === "grpo" ? x / (1 + eps) : x;
        if (whitenSegment) whitenSegment[r] = 0;
      }
      continue;
    }
    if (whitenSegment) whitenSegment[r] = 0;
    switch (name) {
      case "grpo":
        rowAdvantages[r] = (x - mean) / (stats.std[g]! + eps);
        break;
      case "dr-grpo":
      case "reinforce++-baseline":
        rowAdvantages[r] = x - mean;
        break;
      case "rloo":
        // x minus the mean of the other n - 1 rewards.
        rowAdvantages[r] = (n / (n - 1)) * (x - mean);
        break;
      case "opo":
        rowAdvantages[r] = x - stats.weightedMean[g]!;
        break;
    }
  }
  let advantages = yield* call("broadcastRows", { offsets: p.offsets, rowValues: rowAdvantages, mask: p.lossMask });
  if (whitenSegment) {
    advantages = yield* call("maskedWhiten", {
      offsets: p.offsets,
      x: advantages,
      mask: p.lossMask,
      rowSegment: whitenSegment,
      numSegments: 1,
    });
  }
  advantages = yield* normalizeSteps(name, batch, p, advantages, spec.normalize);
  return { advantages, lossMask: p.lossMask, rowAdvantages, returns: null };
}
