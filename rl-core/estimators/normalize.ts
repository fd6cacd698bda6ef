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
  const segments = normalizeSegments(estimator, batch, prepared, by)!;
  return yield* call("maskedWhiten", {
    offsets: prepared.offsets,
    x: advantages,
    mask: prepared.lossMask,
    rowSegment: segments.rowSegment,
    numSegments: segments.numSegments,
  });
}

/**
 * maskedWhiten (default options: unbiased variance, eps 1e-8, mean shifted out) of a signal that is constant
 * within each row, computed on the rows: every mask-1 token of row r would hold float32(values[r]) (what
 * broadcastRows stores), so the token sums are the row sums weighted by the rows' mask-1 counts, in another
 * order. Returns the whitened row values (0 for rows in segment -1), to be broadcast; it skips the two
 * passes over every token that maskedWhiten takes.
 */
export function whitenRowValues(
  values: Float64Array,
  counts: Int32Array,
  rowSegment: Int32Array | null,
  numSegments: number,
): Float64Array {
  const rows = values.length;
  const x = values.map(Math.fround);
  const segOf = (r: number) => (rowSegment ? rowSegment[r]! : 0);
  const n = new Float64Array(numSegments);
  const sum = new Float64Array(numSegments);
  for (let r = 0; r < rows; r++) {
    const g = segOf(r);
    if (g < 0) continue;
    n[g] = n[g]! + counts[r]!;
    sum[g] = sum[g]! + counts[r]! * x[r]!;
  }
  const mean = sum.map((s, g) => (n[g]! > 0 ? s / n[g]! : 0));
  const sq = new Float64Array(numSegments);
  for (let r = 0; r < rows; r++) {
    const g = segOf(r);
    if (g < 0) continue;
    const d = x[r]! - mean[g]!;
    sq[g] = sq[g]! + counts[r]! * d * d;
  }
  const inv = sq.map((q, g) => 1 / Math.sqrt((n[g]! > 1 ? q / (n[g]! - 1) : 0) + 1e-8));
  const out = new Float64Array(rows);
  for (let r = 0; r < rows; r++) {
    const g = segOf(r);
    out[r] = g < 0 ? 0 : (x[r]! - mean[g]!) * inv[g]!;
  }
  return out;
}

/** Segments for `normalize` (null: none; rowSegment null: the whole batch), as normalizeSteps uses them. */
export function normalizeSegments(
  estimator: string,
  batch: RolloutBatch,
  prepared: PreparedBatch,
  by: NormalizeBy | undefined,
): { rowSegment: Int32Array | null; numSegments: number } | null {
  if (by === undefined || by === "none") return null;
  if (by === "batch" && !batch.noSignal) return { rowSegment: null, numSegments: 1 };
  return segmentIds(estimator, batch, prepared.kept, by);
}

/** Whitens existing token advantages by batch / task / harness (for trainers that bring their own). */
export function* normalizeOnlySteps(
  batch: RolloutBatch,
  advantages: Float32Array,
  by: NormalizeBy,
): Steps<Float32Array> {
  const prepared = prepareBatch("normalize", batch, false);
  return yield* normalizeSteps("normalize", batch, prepared, advantages, by);
}
