// Optional whitening of final token advantages per batch, task, harness or (task, harness).
import { prepareBatch, segmentIds, type PreparedBatch } from "./batch.ts";
import { call, type Steps } from "./steps.ts";
import type { NormalizeBy, RolloutBatch } from "./types.ts";

export function* normalizeSteps(
  estimator: string,
  batch: RolloutBatch,
  prepared: PreparedBatch,
  advantages: Float32Array,
  by: NormalizeBy | undefined,
): Steps<Float32Array> {
  if (by === undefined || by === "none") return advantages;
  // Dropped rows have an all-zero mask already, so they never enter the statistics.
  const segments = by === "batch" ? null : segmentIds(estimator, batch, prepared.kept, by);
  return yield* call("maskedWhiten", {
    offsets: prepared.offsets,
    x: advantages,
    mask: prepared.lossMask,
    rowSegment: segments?.rowSegment ?? null,
    numSegments: segments?.numSegments ?? 1,
  });
}

/** Whitens existing token advantages by batch / task / harness (for trainers that bring their own). */
export function* normalizeOnlySteps(batch: RolloutBatch, advantages: Float32Array, by: NormalizeBy): Steps<Float32Array> {
  const prepared = prepareBatch("normalize", batch, false);
  return yield* normalizeSteps("normalize", batch, prepared, advantages, by);
}
