// GAE with values from the trainer, skipping context (mask-0) tokens. Definition: ../kernels/types.ts
// (GaeInput) and README.md.
import { prepareBatch } from "./batch.ts";
import { EstimatorError } from "./errors.ts";
import { normalizeSteps } from "./normalize.ts";
import { call, type Steps } from "./steps.ts";
import type { AdvantageResult, EstimatorSpec, RolloutBatch } from "./types.ts";

export type GaeSpec = Extract<EstimatorSpec, { estimator: "gae" }>;

export function* gaeSteps(batch: RolloutBatch, spec: GaeSpec): Steps<AdvantageResult> {
  const p = prepareBatch("gae", batch, false);
  if (!(spec.values instanceof Float32Array) || spec.values.length !== p.tokens) {
    throw new EstimatorError("gae", `values must be a Float32Array with one entry per token (${p.tokens})`);
  }
  if (spec.tokenRewards !== undefined && (!(spec.tokenRewards instanceof Float32Array) || spec.tokenRewards.length !== p.tokens)) {
    throw new EstimatorError("gae", `tokenRewards must be a Float32Array with one entry per token (${p.tokens})`);
  }
  const gamma = spec.gamma ?? 1;
  const lambda = spec.lambda ?? 1;
  if (!Number.isFinite(gamma) || !Number.isFinite(lambda)) throw new EstimatorError("gae", "gamma and lambda must be finite");

  // The outcome reward enters at the row's last trained token; a row with none has nothing to credit.
  const rewards = spec.tokenRewards ? spec.tokenRewards.slice() : new Float32Array(p.tokens);
  for (let r = 0; r < p.rows; r++) {
    if (!p.kept[r]) continue;
    for (let t = p.offsets[r + 1]! - 1; t >= p.offsets[r]!; t--) {
      if (p.lossMask[t]) {
        rewards[t] = rewards[t]! + batch.rewards[r]!;
        break;
      }
    }
  }
  const out = yield* call("maskedGae", { offsets: p.offsets, rewards, values: spec.values, mask: p.lossMask, gamma, lambda });
  let advantages = out.advantages;
  if (spec.whiten ?? true) {
    // Into `rewards`, this estimator's own scratch, which the GAE kernel has read: one fresh token-sized
    // array fewer per call.
    advantages = yield* call("maskedWhiten", { offsets: p.offsets, x: advantages, mask: p.lossMask }, rewards);
  }
  advantages = yield* normalizeSteps("gae", batch, p, advantages, spec.normalize);
  return { advantages, lossMask: p.lossMask, rowAdvantages: null, returns: out.returns };
}
