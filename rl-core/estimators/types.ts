// What the estimators take and give. Definitions, references and edge cases: README.md beside this file.

/** One packed batch of trajectories (rows), ragged as in ../kernels/types.ts. */
export interface RolloutBatch {
  offsets: Int32Array;
  /** Per token: 1 = a sampled token to train on, 0 = context (prompt, tool output, shared prefix). */
  lossMask: Uint8Array;
  /** Per row: the rollout's outcome reward. */
  rewards: Float64Array;
  /** Per row: the rollout group (n samples of one task). Any integers; a negative id = not grouped (dropped). */
  groupIds?: Int32Array;
  /** Per row: 1 = dropped (the rollout finished as infra_error): zero advantage, zero loss weight. */
  dropped?: Uint8Array;
  /** Per row, for normalize: "task" / "task-harness". */
  taskIds?: Int32Array;
  /** Per row, for normalize: "harness" / "task-harness". */
  harnessIds?: Int32Array;
  /**
   * Per row: 1 = the row's group gave it no signal (no baseline: a group of one, or equal rewards). `normalize`
   * leaves such rows out of its statistics and at advantage 0, so whitening never turns "no signal" into one.
   */
  noSignal?: Uint8Array;
  /**
   * Per row, for `tree`: the sample (rollout) the row belongs to. V(n) is then the mean reward over the samples
   * with a leaf under n, each counted once however many of its trajectories end there. Absent: every row is a sample.
   */
  rowSample?: Int32Array;
}

/**
 * Optional whitening of the final token advantages over mask-1 tokens of kept rows: over the whole batch,
 * or separately within each task, harness, or (task, harness) pair.
 */
export type NormalizeBy = "none" | "batch" | "task" | "harness" | "task-harness";

interface CommonOptions {
  normalize?: NormalizeBy;
  /**
   * A group with one kept rollout has no baseline: "zero" (default) gives it advantage 0; "raw" gives what
   * verl gives (mean 0, std 1, so the raw reward; for GRPO r / (1 + eps)).
   */
  singleton?: "zero" | "raw";
}

/** The rollout's prefix tree(s) for tree-aware advantages. */
export interface TreeSpec {
  /** Per node: parent node, or -1 for the root of a rollout's tree. Topological: parent[i] < i. */
  parent: Int32Array;
  /** Per token: the node (segment) it belongs to; -1 = none (advantage 0). */
  tokenNode: Int32Array;
  /** Per row: the trajectory's leaf node (-1 only for dropped rows). */
  rowLeaf: Int32Array;
}

export type EstimatorSpec =
  | (CommonOptions & { estimator: "grpo"; /** Added to the std (verl's epsilon). Default 1e-6. */ eps?: number })
  | (CommonOptions & { estimator: "dr-grpo" })
  | (CommonOptions & { estimator: "rloo" })
  | (CommonOptions & {
      estimator: "reinforce++-baseline";
      /** Whiten over this batch's trained tokens (default true); false leaves r - mean for a later whitening. */
      whiten?: boolean;
    })
  | (CommonOptions & {
      estimator: "reinforce++";
      /** Discount of the per-token return (default 1). */
      gamma?: number;
      /** Per token rewards added before the returns, e.g. -beta * KL(policy || ref) (KL in the reward). */
      tokenRewards?: Float32Array;
      /** Whiten over this batch's trained tokens (default true). */
      whiten?: boolean;
    })
  | (CommonOptions & { estimator: "opo" })
  | (CommonOptions & {
      estimator: "gae";
      /** Per token: the trainer's value estimates. */
      values: Float32Array;
      /** Per token rewards (e.g. a KL penalty); the row's outcome reward is added at its last mask-1 token. */
      tokenRewards?: Float32Array;
      /** Default 1 (verl's default). */
      gamma?: number;
      /** Default 1 (verl's default). */
      lambda?: number;
      /** Whiten the advantages over the batch's mask-1 tokens, as verl does. Default true. */
      whiten?: boolean;
    })
  | (CommonOptions & {
      estimator: "tree";
      tree: TreeSpec;
      /** Divide a node's advantage by sqrt(leaves under it), as TreeRL. Default true. */
      scaleBySqrtLeaves?: boolean;
    })
  | (CommonOptions & {
      /** GRPO per branch point: a segment against the rollouts through the branch point it leaves (branch-grpo.ts). */
      estimator: "branch-grpo";
      tree: TreeSpec;
      /** Added to the std, as GRPO's. Default 1e-6. */
      eps?: number;
    });

export type EstimatorName = EstimatorSpec["estimator"];

export const ESTIMATOR_NAMES: readonly EstimatorName[] = [
  "grpo",
  "dr-grpo",
  "rloo",
  "reinforce++-baseline",
  "reinforce++",
  "opo",
  "gae",
  "tree",
  "branch-grpo",
];

export interface AdvantageResult {
  /** Per token; 0 on mask-0 tokens and on dropped rows. */
  advantages: Float32Array;
  /** The loss mask to train with: the input mask with dropped rows zeroed. Feed it to lossWeights. */
  lossMask: Uint8Array;
  /** Per row, for outcome estimators: the row's advantage before any whitening; null otherwise. */
  rowAdvantages: Float64Array | null;
  /** Per row, for outcome estimators: 1 where the row's group gives it no signal (no baseline, or equal rewards). */
  noSignal?: Uint8Array | null;
  /** Per token, GAE only: advantages (before whitening) + values; 0 on mask-0 tokens. */
  returns: Float32Array | null;
}
