// Plain REINFORCE++ (Hu et al., arXiv:2501.03262; verl `compute_reinforce_plus_plus_outcome_advantage`, OpenRLHF
// `reinforce`): per token, the discounted return of the token rewards (-beta * KL in the reward, given as
// `tokenRewards`) with the outcome reward at the row's last trained token, G_t = r_t + gamma * G_t', then whitened
// over the batch's trained tokens. No baseline: the whitening is its only normalisation. It is the masked GAE scan
// with values 0 and lambda 1 (context tokens skipped), so the native kernels serve it.
import { prepareBatch } from "./batch.ts";
import { EstimatorError } from "./errors.ts";
import { normalizeSteps } from "./normalize.ts";
import { call, type Steps } from "./steps.ts";
import type { AdvantageResult, EstimatorSpec, RolloutBatch } from "./types.ts";

export type ReinforceSpec = Extract<EstimatorSpec, { estimator: "reinforce++" }>;

export function* reinforceSteps(batch: RolloutBatch, spec: ReinforceSpec): Steps<AdvantageResult> {
  const p = prepareBatch("reinforce++", batch, false);
  if (
    spec.tokenRewards !== undefined &&
    (!(spec.tokenRewards instanceof Float32Array) || spec.tokenRewards.length !== p.tokens)
  ) {
    throw new EstimatorError(
      "reinforce++",
      `tokenRewards must be a Float32Array with one entry per token (${p.tokens})`,
    );
  }
  const gamma = spec.gamma ?? 1;
  if (!Number.isFinite(gamma)) throw new EstimatorError("reinforce++", "gamma must be finite");
  const out = yield* call("maskedGae", {
    offsets: p.offsets,
    rewards: spec.tokenRewards ?? null,
    rowRewards: batch.rewards,
    values: new Float32Array(p.tokens),
    mask: p.lossMask,
    gamma,
    lambda: 1,
  });
  let advantages = out.advantages;
  if (spec.whiten ?? true)
    advantages = yield* call("maskedWhiten", { offsets: p.offsets, x: advantages, mask: p.lossMask });
  advantages = yield* normalizeSteps("reinforce++", batch, p, advantages, spec.normalize);
  return { advantages, lossMask: p.lossMask, rowAdvantages: null, returns: out.returns };
}
