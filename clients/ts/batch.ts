// A training batch as a trainer uses it: typed-array views over the message's bytes (no copy where aligned).
import { float32s, int32s, uint8s, type BatchMessage } from "../../protocol/index.ts";

/** A batch with its per-token arrays as typed arrays (rows + 1 `offsets`: row r holds tokens [offsets[r], offsets[r + 1])). */
export interface TrainingBatch extends Omit<
  BatchMessage,
  "offsets" | "tokenIds" | "lossMask" | "logprobs" | "advantages" | "lossWeights" | "callIndex" | "padding"
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
}

export function decodeBatch({ padding: _, ...m }: BatchMessage): TrainingBatch {
  return {
    ...m,
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
