// Checks a RolloutBatch and works out what every estimator needs: which rows are kept, the effective
// loss mask (dropped rows zeroed), and dense group ids (-1 for rows that are dropped or not grouped).
import { checkOffsets } from "../kernels/validate.ts";
import { EstimatorError } from "./errors.ts";
import type { RolloutBatch } from "./types.ts";

export interface PreparedBatch {
  rows: number;
  tokens: number;
  offsets: Int32Array;
  /** The input mask when no row is dropped, else a copy with dropped rows zeroed. */
  lossMask: Uint8Array;
  /** Per row: 1 = kept. */
  kept: Uint8Array;
  /** Dense 0..numGroups-1 per kept, grouped row; -1 otherwise. Null when the estimator needs no groups. */
  groupIds: Int32Array | null;
  numGroups: number;
}

function expectRowArray(
  estimator: string,
  name: string,
  value: unknown,
  ctor: abstract new (...args: never[]) => ArrayLike<number>,
  rows: number,
): void {
  if (value === undefined) return;
  if (!(value instanceof ctor) || (value as ArrayLike<number>).length !== rows) {
    throw new EstimatorError(estimator, `${name} must be a ${ctor.name} with one entry per row (${rows})`);
  }
}

export function prepareBatch(estimator: string, batch: RolloutBatch, needsGroups: boolean): PreparedBatch {
  const tokens = checkOffsets(estimator, batch.offsets);
  const rows = batch.offsets.length - 1;
  if (!(batch.lossMask instanceof Uint8Array) || batch.lossMask.length !== tokens) {
    throw new EstimatorError(estimator, `lossMask must be a Uint8Array with one entry per token (${tokens})`);
  }
  if (!(batch.rewards instanceof Float64Array) || batch.rewards.length !== rows) {
    throw new EstimatorError(estimator, `rewards must be a Float64Array with one entry per row (${rows})`);
  }
  expectRowArray(estimator, "groupIds", batch.groupIds, Int32Array, rows);
  expectRowArray(estimator, "dropped", batch.dropped, Uint8Array, rows);
  expectRowArray(estimator, "taskIds", batch.taskIds, Int32Array, rows);
  expectRowArray(estimator, "harnessIds", batch.harnessIds, Int32Array, rows);
  expectRowArray(estimator, "noSignal", batch.noSignal, Uint8Array, rows);
  expectRowArray(estimator, "rowSample", batch.rowSample, Int32Array, rows);
  if (needsGroups && !batch.groupIds) throw new EstimatorError(estimator, "groupIds are required");

  const kept = new Uint8Array(rows);
  let droppedAny = false;
  for (let r = 0; r < rows; r++) {
    const grouped = !needsGroups || batch.groupIds![r]! >= 0;
    kept[r] = grouped && !batch.dropped?.[r] ? 1 : 0;
    if (!kept[r]) {
      droppedAny = true;
      continue;
    }
    if (!Number.isFinite(batch.rewards[r]!)) {
      throw new EstimatorError(
        estimator,
        `row ${r} has reward ${batch.rewards[r]}; drop it (infra_error) or give a number`,
      );
    }
  }

  let lossMask = batch.lossMask;
  if (droppedAny) {
    lossMask = batch.lossMask.slice();
    for (let r = 0; r < rows; r++) if (!kept[r]) lossMask.fill(0, batch.offsets[r]!, batch.offsets[r + 1]!);
  }

  let groupIds: Int32Array | null = null;
  let numGroups = 0;
  if (needsGroups) {
    groupIds = new Int32Array(rows).fill(-1);
    const dense = new Map<number, number>();
    for (let r = 0; r < rows; r++) {
      if (!kept[r]) continue;
      const id = batch.groupIds![r]!;
      let g = dense.get(id);
      if (g === undefined) {
        g = dense.size;
        dense.set(id, g);
      }
      groupIds[r] = g;
    }
    numGroups = dense.size;
  }
  return { rows, tokens, offsets: batch.offsets, lossMask, kept, groupIds, numGroups };
}

/**
 * Dense per-row segment ids for normalization: -1 for rows not kept and for rows without signal (`noSignal`),
 * which keep advantage 0.
 */
export function segmentIds(
  estimator: string,
  batch: RolloutBatch,
  kept: Uint8Array,
  by: "batch" | "task" | "harness" | "task-harness",
): { rowSegment: Int32Array; numSegments: number } {
  const needTask = by === "task" || by === "task-harness";
  const needHarness = by === "harness" || by === "task-harness";
  if ((needTask && !batch.taskIds) || (needHarness && !batch.harnessIds)) {
    throw new EstimatorError(
      estimator,
      `normalize "${by}" needs ${needTask ? "taskIds" : ""}${needTask && needHarness ? " and " : ""}${needHarness ? "harnessIds" : ""}`,
    );
  }
  const rowSegment = new Int32Array(kept.length).fill(-1);
  const dense = new Map<string, number>();
  for (let r = 0; r < kept.length; r++) {
    if (!kept[r] || batch.noSignal?.[r]) continue;
    const key = `${needTask ? batch.taskIds![r] : ""}/${needHarness ? batch.harnessIds![r] : ""}`;
    let s = dense.get(key);
    if (s === undefined) {
      s = dense.size;
      dense.set(key, s);
    }
    rowSegment[r] = s;
  }
  return { rowSegment, numSegments: dense.size };
}
