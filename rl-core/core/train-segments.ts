// Which rows of a delivered rollout train. Gateways mark every row's own tokens in its loss mask and flag the rows of
// the segment kinds they train; a core with --train-segments chooses the kinds itself, unless the rollout's metadata
// names them (`train_segments`), which always wins.
import type { RolloutMessage } from "../../protocol/index.ts";

export function trainedRows(
  m: Pick<RolloutMessage, "trained" | "segments">,
  metadata: Record<string, unknown>,
  trainSegments: readonly string[] | undefined,
): Uint8Array {
  if (trainSegments === undefined || (metadata["train_segments"] !== undefined && metadata["train_segments"] !== null))
    return m.trained;
  return Uint8Array.from(m.segments, (segment) => (trainSegments.includes(segment) ? 1 : 0));
}
