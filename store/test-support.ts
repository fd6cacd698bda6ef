// Records for tests that write or reconstruct calls without a gateway (an ok, unattributed, non-streamed chat call
// with empty bodies and trusted ids; each test states what it needs to differ), and damage done to a store on purpose.
import { open } from "lmdb";
import type { CallRecord, RolloutRecord } from "./records.ts";
import { environmentOptions, type Store } from "./store.ts";

export function testCallRecord(
  fields: Pick<CallRecord, "seq" | "promptTokenIds" | "choices"> & Partial<CallRecord>,
): CallRecord {
  return {
    rolloutId: null,
    api: "chat.completions",
    path: "/v1/chat/completions",
    stream: false,
    model: "sim",
    status: "ok",
    httpStatus: 200,
    error: null,
    requestReceived: {},
    requestForwarded: {},
    response: {},
    tokenSource: "upstream",
    tokenIssue: null,
    timings: { start: 0, upstreamStart: 0, firstByte: 0, firstToken: null, end: 0, overheadMs: 0 },
    ...fields,
  };
}

/** An open rollout record for tests; each test states what it needs to differ. */
export function testRolloutRecord(fields: Pick<RolloutRecord, "id"> & Partial<RolloutRecord>): RolloutRecord {
  return {
    key: `rlk_${fields.id}`,
    group: null,
    task: null,
    harness: null,
    metadata: {},
    status: "open",
    reward: null,
    createdAt: 1,
    finishedAt: null,
    ...fields,
  };
}

/** Removes a stored call behind the store's back: the damage the commit's reference check guards against. */
export function dropStoredCall(store: Store, rolloutId: string, seq: number): void {
  const root = open(environmentOptions(store.path, store.durability, store.mapSize));
  const calls = root.openDB<unknown, [string, number]>({ name: "calls" });
  root.transactionSync(() => void calls.remove([rolloutId, seq]));
}
