// Inputs and outputs of the numeric kernels, shared by the reference and the native backends.
//
// A ragged batch holds `rows` variable-length rows back to back: `offsets` (Int32Array, rows + 1 entries,
// offsets[0] = 0, non-decreasing) gives row r the tokens [offsets[r], offsets[r + 1]). Token-level arrays
// are Float32Array / Uint8Array (masks: 1 = on) of offsets[rows] entries; row-level and group-level numbers
// are Float64Array. Every kernel returns fresh outputs, or fills the caller's (`{ out }`).

export type Backend = "native-cuda" | "native-cpu" | "reference";

export const LOSS_AGG_MODES = [
  "token-mean",
  "seq-mean-token-mean",
  "seq-mean-token-sum",
  "seq-mean-token-sum-norm",
] as const;
export type LossAggMode = (typeof LOSS_AGG_MODES)[number];

export const KL_KINDS = ["k1", "k2", "k3"] as const;
export type KlKind = (typeof KL_KINDS)[number];

export interface ExecOptions {
  /** Native CPU worker threads. Default: 1 for sync calls, all hardware threads (RLGATE_THREADS) for async. */
  threads?: number;
}

/** Per-call options; `out` receives the results instead of fresh arrays (see outputs.ts). */
export type KernelOptions<K extends KernelName> = ExecOptions & { out?: KernelOutput<K> };

/** Per-group statistics over rows; rows with group id -1 are left out. */
export interface GroupStatsInput {
  values: Float64Array;
  groupIds: Int32Array;
  numGroups: number;
  /** Per-row weights for `weightedMean` (e.g. response lengths for OPO). */
  weights?: Float64Array | null;
}
export interface GroupStats {
  count: Int32Array;
  mean: Float64Array;
  /** Unbiased (n - 1) sample standard deviation, as torch.std; 0 when count < 2. */
  std: Float64Array;
  /** sum(w * x) / sum(w); the mean when no weights are given; 0 when the weights sum to 0. */
  weightedMean: Float64Array;
}

/** out[t] = mask[t] ? rowValues[row of t] : 0 (no mask: every token). */
export interface BroadcastRowsInput {
  offsets: Int32Array;
  rowValues: Float64Array;
  mask?: Uint8Array | null;
}

/** out[t] = mask[t] && index[t] >= 0 ? values[index[t]] : 0; index -1 means "none", anything else out of range throws. */
export interface GatherTokensInput {
  values: Float64Array;
  index: Int32Array;
  mask?: Uint8Array | null;
}

/** Number of mask-1 tokens per row. */
export interface RowCountsInput {
  offsets: Int32Array;
  mask: Uint8Array;
}

/**
 * GAE as a reverse scan per row that skips mask-0 (context) tokens, as verl's compute_gae_advantage_return:
 * for a mask-1 token t with t' the next mask-1 token of its row (V = A = 0 past the last one),
 *   delta_t = r_t + gamma * V(t') - V(t),  A_t = delta_t + gamma * lambda * A(t'),  R_t = A_t + V(t).
 * Mask-0 tokens get A = R = 0 and their rewards are ignored. No whitening here.
 * r_t is `rewards[t]` (absent or null: 0) plus, at each row's last mask-1 token, `rowRewards[row]` (an outcome
 * reward, summed in double; a row without mask-1 tokens is credited nothing). Row rewards spare a caller the
 * token-sized array an outcome reward would otherwise need, and the kernel reading it.
 */
export interface GaeInput {
  offsets: Int32Array;
  rewards?: Float32Array | null;
  rowRewards?: Float64Array | null;
  values: Float32Array;
  mask: Uint8Array;
  gamma: number;
  lambda: number;
}
export interface GaeOutput {
  advantages: Float32Array;
  returns: Float32Array;
}

/**
 * Masked whitening, per segment of rows (no rowSegment: the whole batch is one segment; segment -1: the
 * row is left out and gets 0): out = (x - mean) / sqrt(var + eps), plus mean again when !shiftMean, on
 * mask-1 tokens; 0 on the others. Defaults follow verl's masked_whiten: unbiased variance, eps 1e-8,
 * shiftMean true. var = 0 when a segment has fewer than 2 tokens (unbiased), so such tokens get 0.
 */
export interface WhitenInput {
  offsets: Int32Array;
  x: Float32Array;
  mask: Uint8Array;
  rowSegment?: Int32Array | null;
  numSegments?: number;
  shiftMean?: boolean;
  unbiased?: boolean;
  eps?: number;
}

/**
 * Mean leaf reward under each node of a forest. Nodes are in topological order: parent[i] is -1 (a root)
 * or < i. Leaf k adds leafReward[k] at node leafNode[k] (-1: skipped). Nodes with no leaf below get 0.
 */
export interface TreeValuesInput {
  parent: Int32Array;
  leafNode: Int32Array;
  leafReward: Float64Array;
}
export interface TreeValues {
  value: Float64Array;
  leafCount: Int32Array;
}

/** Truncated importance weights: mask ? min(exp(logpOld - logpRollout), cap) : 0. */
export interface ImportanceInput {
  logpOld: Float32Array;
  logpRollout: Float32Array;
  mask?: Uint8Array | null;
  cap: number;
}

/**
 * Per-token estimators of KL(policy || ref) (Schulman 2020; verl's kl_penalty):
 * k1 = logp - ref; k2 = (logp - ref)^2 / 2; k3 = exp(d) - d - 1 with d = clamp(ref - logp, -20, 20),
 * clamped to [-10, 10]. Mask-0 tokens get 0.
 */
export interface KlInput {
  logp: Float32Array;
  logpRef: Float32Array;
  mask?: Uint8Array | null;
  kind: KlKind;
}

/**
 * Per-token weights w with sum_t w_t * loss_t == verl's agg_loss(loss, mask, mode) (see README.md).
 * Counted sequences are rows with at least one mask-1 token. Overrides (> 0) replace what this batch
 * gives, for normalizing micro-batches by a global count: totalTokens (token-mean), totalSeqs
 * (seq-mean-*), maxLen (seq-mean-token-sum-norm; default: the largest mask-1 count of a row here).
 */
export interface LossWeightsInput {
  offsets: Int32Array;
  mask: Uint8Array;
  mode: LossAggMode;
  maxLen?: number;
  totalTokens?: number;
  totalSeqs?: number;
}

export interface KernelSignatures {
  groupStats: [GroupStatsInput, GroupStats];
  broadcastRows: [BroadcastRowsInput, Float32Array];
  gatherTokens: [GatherTokensInput, Float32Array];
  rowCounts: [RowCountsInput, Int32Array];
  maskedGae: [GaeInput, GaeOutput];
  maskedWhiten: [WhitenInput, Float32Array];
  treeNodeValues: [TreeValuesInput, TreeValues];
  importanceWeights: [ImportanceInput, Float32Array];
  klDivergence: [KlInput, Float32Array];
  lossWeights: [LossWeightsInput, Float32Array];
}

export type KernelName = keyof KernelSignatures;
export type KernelInput<K extends KernelName> = KernelSignatures[K][0];
export type KernelOutput<K extends KernelName> = KernelSignatures[K][1];

export const KERNEL_NAMES: readonly KernelName[] = [
  "groupStats",
  "broadcastRows",
  "gatherTokens",
  "rowCounts",
  "maskedGae",
  "maskedWhiten",
  "treeNodeValues",
  "importanceWeights",
  "klDivergence",
  "lossWeights",
];

/** One backend: every kernel as a sync function and as an async one (`nameAsync`). */
export type Kernels = { readonly backend: Backend } & {
  readonly [K in KernelName]: (input: KernelInput<K>, options?: KernelOptions<K>) => KernelOutput<K>;
} & {
  readonly [K in KernelName as `${K}Async`]: (
    input: KernelInput<K>,
    options?: KernelOptions<K>,
  ) => Promise<KernelOutput<K>>;
};
