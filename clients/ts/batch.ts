// A training batch as a trainer uses it: typed-array views over the message's bytes (no copy where aligned).
import { float32s, int32s, uint8s, type BatchMessage } from "../../protocol/index.ts";

/** A batch with its per-token arrays as typed arrays (rows + 1 `offsets`: row r holds tokens [offsets[r], offsets[r + 1])). */
export interface TrainingBatch extends Omit<
  BatchMessage,
  | "offsets"
  | "tokenIds"
  | "lossMask"
  | "logprobs"
  | "advantages"
  | "lossWeights"
  | "callIndex"
  | "padding"
  | "routedExperts"
  | "parents"
  | "positions"
  | "tokenRows"
  | "rowNodes"
  | "trieOffsets"
  | "subtreeEnds"
> {
  offsets: Int32Array;
  tokenIds: Int32Array;
  lossMask: Uint8Array;
  /** The inference server's sampling logprobs. */
  logprobs: Float32Array;
  advantages: Float32Array;
  /** loss = sum(lossWeights * perTokenLoss). */
  lossWeights: Float32Array;
  /** Per token: index into its row's rowInfo[r].calls of the call that sampled it; -1 on context (or unknown). */
  callIndex: Int32Array;
  /**
   * MoE routing replay: per token [moeLayers, moeTopK] expert indexes (a view, no copy), aligned with tokenIds; row
   * r replays tokens [offsets[r], offsets[r + 1] − 1) (its last token's entry is 0). Absent without routing.
   */
  routedExperts?: Uint8Array | Uint16Array;
  /** "rows" or "tree" (proto/rlgate/v1/trainer.proto): what the per-token arrays above are laid out by. */
  layout: "rows" | "tree";
  /** The tree layout's structure (absent in rows): views, no copy. */
  tree?: TreeStructure;
}

/**
 * A tree batch's structure: tokens are each rollout's trie in depth-first order, so a token's subtree is the span
 * right after it and its ancestors are exactly the tokens j < t with t in j's subtree.
 */
export interface TreeStructure {
  /** Per token, its parent's index (-1 at a trie's root). */
  parents: Int32Array;
  /** Per token, its depth: its position id in every row through it. */
  positions: Int32Array;
  /** Per token, the row whose fields it carries: callIndex points into rowInfo[tokenRows[t]].calls. */
  tokenRows: Int32Array;
  /** Per row token (rows delimited by `offsets`), its tree token: field[rowNodes[i]] is the rows layout. */
  rowNodes: Int32Array;
  /** One trie per rollout: tries + 1 entries. */
  trieOffsets: Int32Array;
  /** Per token, the end (exclusive) of its subtree: token q attends to k iff k <= q < subtreeEnds[k]. */
  subtreeEnds: Int32Array;
}

/**
 * A per-token array of a tree batch in the rows layout (a copy). `carried`: the value only where the row carries
 * it (the row a tree token takes its fields from: loss mask, loss weights, advantages, which rows give one row
 * only), 0 at the token's other rows; otherwise every row through the token gets it (ids, logprobs).
 */
export function toRows<T extends Float32Array | Int32Array | Uint8Array>(
  batch: TrainingBatch,
  values: T,
  carried = false,
): T {
  if (!batch.tree) return values;
  const { rowNodes, tokenRows } = batch.tree;
  const out = new (values.constructor as new (n: number) => T)(rowNodes.length);
  for (let r = 0; r < batch.rows; r++) {
    for (let i = batch.offsets[r]!; i < batch.offsets[r + 1]!; i++) {
      const t = rowNodes[i]!;
      if (!carried || tokenRows[t] === r) out[i] = values[t]!;
    }
  }
  return out;
}

const NONE = new Uint8Array(0);

/** A uint16 view of LE bytes (copied once when unaligned). */
function uint16s(bytes: Uint8Array): Uint16Array {
  const b = bytes.byteOffset % 2 === 0 ? bytes : bytes.slice();
  return new Uint16Array(b.buffer, b.byteOffset, b.byteLength / 2);
}

export function decodeBatch({
  padding: _,
  routedExperts,
  parents,
  positions,
  tokenRows,
  rowNodes,
  trieOffsets,
  subtreeEnds,
  ...m
}: BatchMessage): TrainingBatch {
  const tree = m.layout === "tree";
  return {
    ...m,
    layout: tree ? "tree" : "rows",
    ...(tree
      ? {
          tree: {
            parents: int32s(parents ?? NONE, "parents"),
            positions: int32s(positions ?? NONE, "positions"),
            tokenRows: int32s(tokenRows ?? NONE, "token_rows"),
            rowNodes: int32s(rowNodes ?? NONE, "row_nodes"),
            trieOffsets: int32s(trieOffsets ?? NONE, "trie_offsets"),
            subtreeEnds: int32s(subtreeEnds ?? NONE, "subtree_ends"),
          },
        }
      : {}),
    ...(routedExperts?.byteLength
      ? { routedExperts: m.routedExpertsDtype === "uint16" ? uint16s(routedExperts) : uint8s(routedExperts) }
      : {}),
    offsets: int32s(m.offsets, "offsets"),
    tokenIds: int32s(m.tokenIds, "token_ids"),
    lossMask: uint8s(m.lossMask),
    logprobs: float32s(m.logprobs, "logprobs"),
    advantages: float32s(m.advantages, "advantages"),
    lossWeights: float32s(m.lossWeights, "loss_weights"),
    callIndex: m.callIndex?.byteLength
      ? int32s(m.callIndex, "call_index")
      : new Int32Array(m.tokenIds.byteLength / 4).fill(-1),
  };
}
