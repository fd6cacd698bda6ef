// The estimator settings a core runs with (estimator, whitening scope, singletons, overlong handling, KL in the
// reward), their names for the command line, and the check that refuses a combination that cannot be honoured.
import { ESTIMATOR_NAMES, type EstimatorName } from "../estimators/index.ts";

/** The estimators a core runs on its own: every one but GAE, which needs the trainer's values (ComputeAdvantages). */
export type CoreEstimator = Exclude<EstimatorName, "gae">;
export const CORE_ESTIMATORS: readonly CoreEstimator[] = ESTIMATOR_NAMES.filter((e): e is CoreEstimator => e !== "gae");
export type OutcomeEstimator = "grpo" | "dr-grpo" | "rloo" | "reinforce++-baseline" | "opo";
export const OUTCOME_ESTIMATORS: readonly string[] = ["grpo", "dr-grpo", "rloo", "reinforce++-baseline", "opo"];

/** Where REINFORCE++ and REINFORCE++-baseline whiten: over the training batch (the references' choice) or the group. */
export type WhitenScope = "batch" | "group";

/**
 * A group with one kept rollout has no baseline. "zero" (default): advantage 0 and `no_signal`. "raw": what verl
 * gives (verl/trainer/ppo/core_algos.py: compute_grpo_outcome_advantage takes mean 0 and std 1 for a group of one,
 * so r / (1 + eps), Dr.GRPO r; compute_rloo_outcome_advantage leaves a lone score as it is; compute_opo_outcome_advantage
 * and compute_reinforce_plus_plus_baseline_outcome_advantage take baseline 0): its reward r.
 */
export type Singleton = "zero" | "raw";
export const SINGLETON_MODES: readonly Singleton[] = ["zero", "raw"];

/**
 * Rollouts cut at the generation limit (a trained trajectory whose last call finished with `length`), after DAPO
 * (Yu et al. 2025, arXiv:2503.14476): "drop" leaves them out of advantage and loss (counted `overlong`); "mask" keeps
 * them in the group's statistics and out of the loss (overlong filtering; counted `overlong_masked`); "penalty" adds
 * DAPO's soft overlong punishment to every rollout's reward by its length (overlongPenalty).
 */
export type Overlong = "off" | "drop" | "mask" | "penalty";
export const OVERLONG_MODES: readonly Overlong[] = ["off", "drop", "mask", "penalty"];

/** The estimator settings of a core, as `checkEstimatorSettings` reads them (CoreOptions' names). */
export interface EstimatorSettings {
  estimator: CoreEstimator;
  lossAgg?: string;
  maxLen?: number;
  batchUnit?: string;
  whitenScope?: WhitenScope;
  singleton?: Singleton;
  overlong?: Overlong;
  overlongBuffer?: number;
  klCoef?: number;
  klEstimator?: string;
}

/**
 * What is wrong with a core's estimator settings, as one sentence naming the options to fix; null when nothing is.
 * Checked when a core starts, so a setting that cannot be honoured is refused rather than half applied.
 */
export function estimatorSettingsProblem(s: EstimatorSettings): string | null {
  const maxLen = s.maxLen ?? 0;
  if (s.lossAgg === "seq-mean-token-sum-norm" && !(maxLen > 0))
    return "--loss-agg seq-mean-token-sum-norm needs --max-len L (Dr.GRPO's constant, e.g. the generation budget of a rollout in tokens): every rollout's token sum is divided by the same L, which a batch's own longest rollout is not";
  if ((s.singleton ?? "zero") === "raw" && !OUTCOME_ESTIMATORS.includes(s.estimator))
    return `--singleton raw applies to the outcome estimators (${OUTCOME_ESTIMATORS.join(", ")}), not ${s.estimator}: ${s.estimator === "tree" || s.estimator === "branch-grpo" ? "a tree of one rollout is its own root, V(n) − V(root) = 0" : "reinforce++ has no baseline, a group of one is trained like any other"}`;
  const overlong = s.overlong ?? "off";
  const buffer = s.overlongBuffer ?? 0;
  if (overlong === "penalty" && !(maxLen > 0 && buffer > 0 && buffer <= maxLen))
    return `--overlong penalty needs --max-len L_max and --overlong-buffer L_cache with 0 < L_cache <= L_max (DAPO's soft overlong punishment ramps from 0 at L_max − L_cache tokens to −1 at L_max); got --max-len ${maxLen}, --overlong-buffer ${buffer}`;
  if (overlong !== "penalty" && buffer > 0)
    return "--overlong-buffer is the length of DAPO's penalty ramp: it needs --overlong penalty";
  const klCoef = s.klCoef ?? 0;
  if (!(Number.isFinite(klCoef) && klCoef >= 0)) return `--kl-coef must be a finite number >= 0, not ${klCoef}`;
  if (s.klEstimator !== undefined && !["k1", "k2", "k3"].includes(s.klEstimator))
    return `--kl-estimator must be k1, k2 or k3, not ${s.klEstimator}`;
  if (klCoef > 0) {
    if (s.estimator === "tree" || s.estimator === "branch-grpo")
      return `--kl-coef puts KL in the reward of served batches for the outcome estimators and reinforce++, not ${s.estimator} (its node values are computed once, in the core, before any ref logprobs exist)`;
    const needsWholeGroups =
      OUTCOME_ESTIMATORS.includes(s.estimator) || (s.estimator === "reinforce++" && s.whitenScope === "group");
    if (needsWholeGroups && s.batchUnit !== "group")
      return `--kl-coef with ${s.estimator}${s.estimator === "reinforce++" ? " whitened within the group" : ""} needs --batch-unit group: a rollout's KL comes with its batch's ref logprobs, and its group's ${s.estimator === "reinforce++" ? "whitening" : "baseline"} needs every rollout's`;
  }
  return null;
}

/**
 * DAPO's soft overlong punishment (arXiv:2503.14476 eq. 13; verl/workers/reward_manager/dapo.py, DAPORewardManager):
 * 0 up to L_max − L_cache tokens, then ((L_max − L_cache) − |y|) / L_cache down to −1 at L_max, and −1 beyond (an
 * agent's rollout of several calls can exceed the budget; a single call cannot, so verl has no clamp).
 */
export function overlongPenalty(length: number, maxLen: number, buffer: number): number {
  const expected = maxLen - buffer;
  if (length <= expected) return 0;
  if (length > maxLen) return -1;
  return (expected - length) / buffer;
}
