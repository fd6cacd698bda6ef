// Tree-aware advantages over the rollouts' prefix trees, after TreeRL (Hou et al., ACL 2025,
// arXiv:2506.11902, "process supervision from the tree"):
//   V(n)  = mean outcome reward of the leaves (kept trajectories) under node n
//   G(n)  = V(n) - V(root)           global advantage
//   L(n)  = V(n) - V(parent(n))      local advantage
//   A(n)  = (G(n) + L(n)) / sqrt(|leaves(n)|)
// and every trained token of segment n gets A(n). The root is a virtual node per group joining the group's
// rollout trees (so V(root) is the group mean and the top of each rollout is judged against its siblings).
// Nodes are TreeRL's segments between branch points: a node with the same leaves as its parent (a unary
// chain, e.g. a segment split at a call boundary) takes the nearest ancestor with more leaves as its
// parent, so splitting a segment changes nothing. With no branching at all, A = 2 (r - mean) / 1 per
// trajectory, i.e. twice Dr.GRPO.
import { prepareBatch } from "./batch.ts";
import { EstimatorError } from "./errors.ts";
import { normalizeSteps } from "./normalize.ts";
import { call, type Steps } from "./steps.ts";
import type { AdvantageResult, EstimatorSpec, RolloutBatch, TreeSpec } from "./types.ts";

export type TreeEstimatorSpec = Extract<EstimatorSpec, { estimator: "tree" }>;

/**
 * Calls `visit(node, firstRow)` once for every node with a leaf of the sample under it, per sample: the rows of one
 * sample (`rowSample`, or each row alone when it is absent) that hold a leaf (`leafNode` >= 0). Tree-sized work (one
 * group's nodes), so it runs here rather than as a kernel: each sample walks up from its leaves until it meets a node
 * it marked already.
 */
export function forEachSampleNode(
  parent: Int32Array,
  leafNode: Int32Array,
  rowSample: Int32Array | undefined,
  visit: (node: number, firstRow: number) => void,
): void {
  const rowsOf = new Map<number, number[]>();
  for (let r = 0; r < leafNode.length; r++) {
    if (leafNode[r]! < 0) continue;
    const sample = rowSample ? rowSample[r]! : r;
    const rows = rowsOf.get(sample);
    if (rows) rows.push(r);
    else rowsOf.set(sample, [r]);
  }
  const mark = new Int32Array(parent.length).fill(-1);
  let k = 0;
  for (const rows of rowsOf.values()) {
    for (const r of rows) {
      for (let j = leafNode[r]!; j >= 0 && mark[j] !== k; j = parent[j]!) {
        mark[j] = k;
        visit(j, rows[0]!);
      }
    }
    k++;
  }
}

/**
 * treeNodeValues with samples instead of leaves: V(n) = mean reward of the samples (rollouts) with a leaf under n,
 * each counted once (at its first row's reward), and the count of those samples.
 */
export function sampleNodeValues(
  parent: Int32Array,
  leafNode: Int32Array,
  rowSample: Int32Array,
  rewards: Float64Array,
): { value: Float64Array; leafCount: Int32Array } {
  const n = parent.length;
  const sum = new Float64Array(n);
  const leafCount = new Int32Array(n);
  forEachSampleNode(parent, leafNode, rowSample, (j, row) => {
    sum[j] = sum[j]! + rewards[row]!;
    leafCount[j] = leafCount[j]! + 1;
  });
  const value = sum.map((s, j) => (leafCount[j]! > 0 ? s / leafCount[j]! : 0));
  return { value, leafCount };
}

/** A group forest: every rollout tree hung under its group's virtual root (nodes 0..groups-1). */
export interface GroupForest {
  p: ReturnType<typeof prepareBatch>;
  groups: number;
  /** Parent per node of the extended forest (-1 for a group's virtual root). */
  ext: Int32Array;
  /** Per row: its leaf in the extended forest (-1 for rows without a group). */
  leafNode: Int32Array;
}

/** Checks a tree spec against the batch and joins the rollout trees of each group under one virtual root. */
export function groupForest(name: string, batch: RolloutBatch, tree: Partial<TreeSpec> | undefined): GroupForest {
  const p = prepareBatch(name, batch, true);
  const { parent, tokenNode, rowLeaf } = tree ?? {};
  if (!(parent instanceof Int32Array)) throw new EstimatorError(name, "tree.parent must be an Int32Array");
  if (!(tokenNode instanceof Int32Array) || tokenNode.length !== p.tokens) {
    throw new EstimatorError(name, `tree.tokenNode must be an Int32Array with one entry per token (${p.tokens})`);
  }
  if (!(rowLeaf instanceof Int32Array) || rowLeaf.length !== p.rows) {
    throw new EstimatorError(name, `tree.rowLeaf must be an Int32Array with one entry per row (${p.rows})`);
  }
  const n = parent.length;
  const groups = p.numGroups;
  const groupIds = p.groupIds!;

  const rootOf = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    const q = parent[i]!;
    if (q < -1 || q >= i) throw new EstimatorError(name, `tree.parent[${i}] = ${q}: nodes must follow their parent`);
    rootOf[i] = q < 0 ? i : rootOf[q]!;
  }
  // Hang every rollout tree under its group's virtual root (nodes 0..groups-1 of the extended forest).
  const rootGroup = new Int32Array(n).fill(-1);
  const leafNode = new Int32Array(p.rows).fill(-1);
  for (let r = 0; r < p.rows; r++) {
    if (groupIds[r]! < 0) continue;
    const leaf = rowLeaf[r]!;
    if (leaf < 0 || leaf >= n) throw new EstimatorError(name, `row ${r} has leaf node ${leaf}, outside 0..${n - 1}`);
    const root = rootOf[leaf]!;
    if (rootGroup[root] !== -1 && rootGroup[root] !== groupIds[r]) {
      throw new EstimatorError(name, `tree rooted at node ${root} holds rows of two groups`);
    }
    rootGroup[root] = groupIds[r]!;
    leafNode[r] = groups + leaf;
  }
  const ext = new Int32Array(groups + n).fill(-1);
  for (let i = 0; i < n; i++) ext[groups + i] = parent[i]! >= 0 ? groups + parent[i]! : rootGroup[i]!;
  return { p, groups, ext, leafNode };
}

/** V(n) (mean of `rewards` over the leaves, or samples, under n) and the count of those leaves. */
export function* nodeValues(
  batch: RolloutBatch,
  forest: GroupForest,
  rewards: Float64Array,
): Steps<{ value: Float64Array; leafCount: Int32Array }> {
  return batch.rowSample
    ? sampleNodeValues(forest.ext, forest.leafNode, batch.rowSample, rewards)
    : yield* call("treeNodeValues", { parent: forest.ext, leafNode: forest.leafNode, leafReward: rewards });
}

export function* treeSteps(batch: RolloutBatch, spec: TreeEstimatorSpec): Steps<AdvantageResult> {
  const forest = groupForest("tree", batch, spec.tree);
  const { p, groups, ext } = forest;
  const n = ext.length - groups;
  const tokenNode = spec.tree.tokenNode;
  const { value, leafCount } = yield* nodeValues(batch, forest, batch.rewards);

  const scale = spec.scaleBySqrtLeaves ?? true;
  const top = new Int32Array(groups + n); // root of each node in the extended forest
  const branchParent = new Int32Array(groups + n).fill(-1); // nearest ancestor with more leaves
  const nodeAdvantage = new Float64Array(groups + n);
  for (let j = 0; j < groups + n; j++) {
    const q = ext[j]!;
    top[j] = q < 0 ? j : top[q]!;
    if (q < 0) continue;
    branchParent[j] = leafCount[q]! > leafCount[j]! || branchParent[q]! < 0 ? q : branchParent[q]!;
    const leaves = leafCount[j]!;
    if (leaves === 0) continue;
    const v = value[j]!;
    // A unary chain up to the root leaves no ancestor with more leaves: L = G there.
    const local = leafCount[branchParent[j]!]! > leaves ? v - value[branchParent[j]!]! : v - value[top[j]!]!;
    const advantage = v - value[top[j]!]! + local;
    nodeAdvantage[j] = scale ? advantage / Math.sqrt(leaves) : advantage;
  }

  let advantages = yield* call("gatherTokens", {
    values: nodeAdvantage.subarray(groups),
    index: tokenNode,
    mask: p.lossMask,
  });
  advantages = yield* normalizeSteps("tree", batch, p, advantages, spec.normalize);
  return { advantages, lossMask: p.lossMask, rowAdvantages: null, returns: null };
}
