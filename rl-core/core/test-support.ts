// Synthetic pending rollouts, ready rows and batch sources for the core's unit tests.
import { bytesOf } from "../../protocol/index.ts";
import type { PendingRollout, ReadyRow, StoredBatch } from "./core-store.ts";
import type { BatchSource } from "./served-batches.ts";

export interface Row {
  ids: number[];
  mask: number[];
}

export function pending(
  id: string,
  reward: number | null,
  rows: Row[],
  extra: Partial<PendingRollout> = {},
): PendingRollout {
  const offsets = new Int32Array(rows.length + 1);
  rows.forEach((r, i) => (offsets[i + 1] = offsets[i]! + r.ids.length));
  const ids = rows.flatMap((r) => r.ids);
  return {
    rolloutId: id,
    groupKey: "group:g#1",
    group: "g",
    generation: 1,
    late: false,
    task: "t",
    harness: "h",
    status: "ok",
    reward,
    declaredSize: 0,
    flagged: false,
    flagReasons: [],
    oversize: false,
    rows: rows.length,
    offsets: bytesOf(offsets),
    tokenIds: bytesOf(Int32Array.from(ids)),
    lossMask: bytesOf(Uint8Array.from(rows.flatMap((r) => r.mask))),
    logprobs: bytesOf(Float32Array.from(ids, (x) => -x / 100)),
    trajectoryIds: rows.map((_, i) => `${id}:${i}`),
    segments: rows.map(() => "main"),
    trained: bytesOf(new Uint8Array(rows.length).fill(1)),
    calls: [],
    callIndex: new Uint8Array(0),
    gateway: "gw",
    cursor: 1,
    receivedAt: Date.now(),
    ...extra,
  };
}

/** A ready row with what packing and serving read besides its tokens. */
export function readyRow(
  fields: Omit<
    ReadyRow,
    "generation" | "late" | "signal" | "context" | "calls" | "callIndex" | "finishReason" | "policyVersion"
  >,
): ReadyRow {
  return {
    generation: 1,
    late: false,
    signal: "ok",
    context: { rollouts: [fields.rolloutId], rewards: [fields.reward], tokens: [0] },
    calls: [],
    callIndex: new Uint8Array(0),
    finishReason: "stop",
    policyVersion: "",
    ...fields,
  };
}

/** A trainer service's batch source over an in-memory map of batches by id (lowest id first; removal deletes). */
export function memoryBatchSource(batches: Map<number, StoredBatch>): BatchSource {
  return {
    next: (exclude) => [...batches.keys()].find((id) => !exclude.has(id)) ?? null,
    get: (id) => batches.get(id),
    remove: async (ids) => ids.filter((id) => batches.delete(id)).length,
    get size() {
      return batches.size;
    },
  };
}
