// Advantage estimators over packed rollout batches, on whichever kernel backend is active (or one passed
// in). Each estimator is written once (a generator of kernel calls) and runs sync or async:
//   computeAdvantages(batch, spec)        on the calling thread (fine for small batches)
//   computeAdvantagesAsync(batch, spec)   off the event loop, kernels spread over threads
// Definitions, references and every edge case: README.md beside this file.
import { kernels as activeKernels, type ExecOptions, type Kernels } from "../kernels/index.ts";
import { EstimatorError } from "./errors.ts";
import { gaeSteps } from "./gae.ts";
import { normalizeOnlySteps } from "./normalize.ts";
import { outcomeSteps } from "./outcome.ts";
import { reinforceSteps } from "./reinforce.ts";
import { runAsync, runSync, type Steps } from "./steps.ts";
import { treeSteps } from "./tree.ts";
import { branchGrpoSteps } from "./branch-grpo.ts";
import type { AdvantageResult, EstimatorSpec, NormalizeBy, RolloutBatch } from "./types.ts";

export * from "./types.ts";
export { EstimatorError } from "./errors.ts";
export { GRPO_EPS } from "./outcome.ts";
export { sampleNodeValues } from "./tree.ts";

export interface RunOptions extends ExecOptions {
  /** Kernel backend; default: the active one (rl-core/kernels). */
  kernels?: Kernels;
}

export function advantageSteps(batch: RolloutBatch, spec: EstimatorSpec): Steps<AdvantageResult> {
  switch (spec.estimator) {
    case "grpo":
    case "dr-grpo":
    case "rloo":
    case "reinforce++-baseline":
    case "opo":
      return outcomeSteps(batch, spec);
    case "reinforce++":
      return reinforceSteps(batch, spec);
    case "gae":
      return gaeSteps(batch, spec);
    case "tree":
      return treeSteps(batch, spec);
    case "branch-grpo":
      return branchGrpoSteps(batch, spec);
    default:
      throw new EstimatorError(String((spec as { estimator: unknown }).estimator), "unknown estimator");
  }
}

export function computeAdvantages(batch: RolloutBatch, spec: EstimatorSpec, options: RunOptions = {}): AdvantageResult {
  return runSync(advantageSteps(batch, spec), options.kernels ?? activeKernels, options);
}

export function computeAdvantagesAsync(
  batch: RolloutBatch,
  spec: EstimatorSpec,
  options: RunOptions = {},
): Promise<AdvantageResult> {
  return runAsync(advantageSteps(batch, spec), options.kernels ?? activeKernels, options);
}

/** Whitens token advantages a trainer brings, by batch, task, harness or both (dropped rows get 0). */
export function normalizeAdvantages(
  batch: RolloutBatch,
  advantages: Float32Array,
  by: NormalizeBy,
  options: RunOptions = {},
): Float32Array {
  return runSync(normalizeOnlySteps(batch, advantages, by), options.kernels ?? activeKernels, options);
}

export function normalizeAdvantagesAsync(
  batch: RolloutBatch,
  advantages: Float32Array,
  by: NormalizeBy,
  options: RunOptions = {},
): Promise<Float32Array> {
  return runAsync(normalizeOnlySteps(batch, advantages, by), options.kernels ?? activeKernels, options);
}
