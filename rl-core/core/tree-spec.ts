// The prefix tree of a group's trajectories, as the tree estimator wants it (rl-core/estimators TreeSpec).
// A rollout's trajectories are root-to-leaf paths of its prefix tree (trajectory/), so the tree is rebuilt
// here from their token ids alone: nodes are the runs between branch points (a compressed trie), numbered
// parents first; each rollout is its own tree (the estimator joins a group's trees under a virtual root).
import type { TreeSpec } from "../estimators/index.ts";

function compare(a: Int32Array, b: Int32Array): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return a[i]! - b[i]!;
  return a.length - b.length;
}

function commonPrefix(a: Int32Array, b: Int32Array, from: number): number {
  const n = Math.min(a.length, b.length);
  let i = from;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

/**
 * `rows[r]` is row r's token ids, `rowTree[r]` the rollout it belongs to (rows of one rollout share one tree).
 * Rows are packed in order: row r's tokens start at the sum of the earlier rows' lengths.
 */
export function buildTreeSpec(rows: readonly Int32Array[], rowTree: ArrayLike<number>): TreeSpec {
  const parent: number[] = [];
  const rowLeaf = new Int32Array(rows.length).fill(-1);
  const rowStart = new Int32Array(rows.length + 1);
  for (let r = 0; r < rows.length; r++) rowStart[r + 1] = rowStart[r]! + rows[r]!.length;
  const tokenNode = new Int32Array(rowStart[rows.length]!).fill(-1);

  const trees = new Map<number, number[]>();
  for (let r = 0; r < rows.length; r++) {
    const members = trees.get(rowTree[r]!);
    if (members) members.push(r);
    else trees.set(rowTree[r]!, [r]);
  }

  // Rows sorted lexicographically: any subset sharing a prefix is contiguous, and its common prefix is the
  // common prefix of its first and last rows.
  const build = (sorted: number[], lo: number, hi: number, depth: number, up: number) => {
    const first = rows[sorted[lo]!]!;
    const end = lo + 1 === hi ? first.length : commonPrefix(first, rows[sorted[hi - 1]!]!, depth);
    const node = parent.length;
    parent.push(up);
    for (let i = lo; i < hi; i++) {
      const r = sorted[i]!;
      tokenNode.fill(node, rowStart[r]! + depth, rowStart[r]! + end);
    }
    let i = lo;
    while (i < hi && rows[sorted[i]!]!.length === end) rowLeaf[sorted[i++]!] = node; // rows ending here
    while (i < hi) {
      const token = rows[sorted[i]!]![end];
      let j = i + 1;
      while (j < hi && rows[sorted[j]!]![end] === token) j++;
      build(sorted, i, j, end, node);
      i = j;
    }
  };
  for (const members of trees.values()) {
    const sorted = [...members].sort((a, b) => compare(rows[a]!, rows[b]!));
    build(sorted, 0, sorted.length, 0, -1);
  }
  return { parent: Int32Array.from(parent), tokenNode, rowLeaf };
}
