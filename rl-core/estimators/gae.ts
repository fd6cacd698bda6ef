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
  if (
    spec.tokenRewards !== undefined &&
    (!(spec.tokenRewards instanceof Float32Array) || spec.tokenRewards.length !== p.tokens)
  ) {
    throw new EstimatorError("gae", `tokenRewards must be a Float32Array with one entry per token (${p.tokens})`);
  }
  const gamma = spec.gamma ?? 1;
  const lambda = spec.lambda ?? 1;
  if (!Number.isFinite(gamma) || !Number.isFinite(lambda))
    throw new EstimatorError("gae", "gamma and lambda must be finite");

  // The outcome reward enters at the row's last trained token (the kernel's row rewards; a row with none has
  // nothing to credit). Dropped rows have an all-zero loss mask, so they are credited nothing either.
  const out = yield* call("maskedGae", {
    offsets: p.offsets,
    rewards: spec.tokenRewards ?? null,
    rowRewards: batch.rewards,
    values: spec.values,
    mask: p.lossMask,
    gamma,
    lambda,
  });
  let advantages = out.advantages;
  if (spec.whiten ?? true) {
    advantages = yield* call("maskedWhiten", { offsets: p.offsets, x: advantages, mask: p.lossMask });
  }
  advantages = yield* normalizeSteps("gae", batch, p, advantages, spec.normalize);
  return { advantages, lossMask: p.lossMask, rowAdvantages: null, returns: out.returns };
}
