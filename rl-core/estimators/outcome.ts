// Outcome-reward estimators with a group baseline: GRPO, Dr.GRPO, RLOO, REINFORCE++-baseline, OPO.
// One advantage per row, broadcast to the row's mask-1 tokens. Definitions and edge cases: README.md.
import { prepareBatch } from "./batch.ts";
import { normalizeSegments, whitenRowValues } from "./normalize.ts";
import { call, type Steps } from "./steps.ts";
import type { AdvantageResult, EstimatorSpec, RolloutBatch } from "./types.ts";

export type OutcomeSpec = Extract<
  EstimatorSpec,
  { estimator: "grpo" | "dr-grpo" | "rloo" | "reinforce++-baseline" | "opo" }
>;

export const GRPO_EPS = 1e-6;

export function* outcomeSteps(batch: RolloutBatch, spec: OutcomeSpec): Steps<AdvantageResult> {
  const name = spec.estimator;
  const p = prepareBatch(name, batch, true);
  const groupIds = p.groupIds!;
  // Trained (mask-1) tokens per row: OPO's lengths, and the weights of the row-level whitening below.
  const counts = yield* call("rowCounts", { offsets: p.offsets, mask: p.lossMask });
  // OPO's length-weighted baseline.
  const weights = name === "opo" ? Float64Array.from(counts) : null;
  const stats = yield* call("groupStats", { values: batch.rewards, groupIds, numGroups: p.numGroups, weights });
  const eps = spec.estimator === "grpo" ? (spec.eps ?? GRPO_EPS) : GRPO_EPS;
  const raw = spec.singleton === "raw";
  const rowAdvantages = new Float64Array(p.rows);
  // Rows their group gives no signal: no baseline (a group of one) or equal rewards (std 0).
  const noSignal = new Uint8Array(p.rows);
  // REINFORCE++-baseline whitens over the batch; rows without a baseline (singletons) stay out of it.
  const ownWhitening = name === "reinforce++-baseline" && (spec.whiten ?? true);
  const whitenSegment = ownWhitening ? new Int32Array(p.rows).fill(-1) : null;
  for (let r = 0; r < p.rows; r++) {
    const g = groupIds[r]!;
    if (g < 0) continue;
    const x = batch.rewards[r]!;
    const n = stats.count[g]!;
    const mean = stats.mean[g]!;
    if (n === 1 || stats.std[g] === 0) noSignal[r] = 1;
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
  // Every mask-1 token of a row gets the row's advantage, so the whitenings (REINFORCE++-baseline's, then
  // `normalize`) are done on the row values, weighted by the rows' trained-token counts: the sums of
  // maskedWhiten over the broadcast tokens, in another order, without two passes over every token each.
  // Then one broadcast.
  let tokenValues: Float64Array = rowAdvantages;
  if (whitenSegment) tokenValues = whitenRowValues(tokenValues, counts, whitenSegment, 1);
  // `normalize` keeps "no signal" at 0 (a row REINFORCE++-baseline's own whitening moved off 0 is whitened again).
  const keepZero = noSignal.map((z, r) => (z && tokenValues[r] === 0 ? 1 : 0));
  const segments = normalizeSegments(name, { ...batch, noSignal: keepZero }, p, spec.normalize);
  if (segments) tokenValues = whitenRowValues(tokenValues, counts, segments.rowSegment, segments.numSegments);
  const advantages = yield* call("broadcastRows", { offsets: p.offsets, rowValues: tokenValues, mask: p.lossMask });
  return { advantages, lossMask: p.lossMask, rowAdvantages, noSignal, returns: null };
}
