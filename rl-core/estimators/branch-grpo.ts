// GRPO per branch point, over the rollouts' prefix tree (branches of a backbone rollout, docs/runner.md#branching):
// each segment n is judged against the rollouts that reached the branch point it leaves, its siblings there
// (the backbone and the branches through that node), with GRPO's normalization:
//   b     = the nearest ancestor of n with more samples under it (the branch point n leaves; the group's root at top)
//   A(n)  = (V(n) − V(b)) / (std_b + ε)
// V the mean reward of the samples under a node (as in `tree`), std_b their unbiased std (as GRPO's torch.std). A
// leaf segment of one rollout gets (r − mean_b) / (std_b + ε): the rollout against its siblings at its branch point.
// Without branching every segment's point is the group's root, and this is GRPO. A point with one sample under it
// has no std: advantage 0 (as GRPO's group of one).
import { call, type Steps } from "./steps.ts";
import { forEachSampleNode, groupForest, nodeValues } from "./tree.ts";
import { GRPO_EPS } from "./outcome.ts";
import { normalizeSteps } from "./normalize.ts";
import type { AdvantageResult, EstimatorSpec, RolloutBatch } from "./types.ts";

export type BranchGrpoSpec = Extract<EstimatorSpec, { estimator: "branch-grpo" }>;

export function* branchGrpoSteps(batch: RolloutBatch, spec: BranchGrpoSpec): Steps<AdvantageResult> {
  const forest = groupForest("branch-grpo", batch, spec.tree);
  const { p, groups, ext } = forest;
  const { value, leafCount } = yield* nodeValues(batch, forest, batch.rewards);
  // Σ (r − V(b))² in a second pass, not E[r²] − V(b)²: with large rewards (1e8 ± 1) that difference is all rounding.
  const squaredDeviation = new Float64Array(ext.length);
  forEachSampleNode(ext, forest.leafNode, batch.rowSample, (j, row) => {
    squaredDeviation[j] = squaredDeviation[j]! + (batch.rewards[row]! - value[j]!) ** 2;
  });
  const eps = spec.eps ?? GRPO_EPS;

  const nodes = ext.length;
  const point = new Int32Array(nodes).fill(-1); // nearest ancestor with more samples, else the root
  const nodeAdvantage = new Float64Array(nodes);
  for (let j = 0; j < nodes; j++) {
    const q = ext[j]!;
    if (q < 0) continue;
    point[j] = leafCount[q]! > leafCount[j]! || point[q]! < 0 ? q : point[q]!;
    const b = point[j]!;
    const m = leafCount[b]!;
    if (leafCount[j]! === 0 || m < 2) continue;
    const variance = squaredDeviation[b]! / (m - 1);
    nodeAdvantage[j] = (value[j]! - value[b]!) / (Math.sqrt(variance) + eps);
  }

  let advantages = yield* call("gatherTokens", {
    values: nodeAdvantage.subarray(groups),
    index: spec.tree.tokenNode,
    mask: p.lossMask,
  });
  advantages = yield* normalizeSteps("branch-grpo", batch, p, advantages, spec.normalize);
  return { advantages, lossMask: p.lossMask, rowAdvantages: null, returns: null };
}
