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
}

/** A uint16 view of LE bytes (copied once when unaligned). */
function uint16s(bytes: Uint8Array): Uint16Array {
  const b = bytes.byteOffset % 2 === 0 ? bytes : bytes.slice();
  return new Uint16Array(b.buffer, b.byteOffset, b.byteLength / 2);
}

export function decodeBatch({ padding: _, routedExperts, ...m }: BatchMessage): TrainingBatch {
  return {
    ...m,
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
