// Retention (`rlgate serve --retain 7d`): a weeks-long run's store stays the size of the window instead of growing
// with every rollout. A rollout is removed — its record, key, calls (request bodies and prompt references point only
// at calls of the same rollout, so they go with it), indexes and finished-log entry — once
//   - it is finished (an open rollout is never in the finished log, so never considered),
//   - every consumer group the store knows has committed a cursor at or past its finish cursor (acknowledged), and
//   - it finished longer ago than the window (its finish cursor is a microsecond stamp of that moment),
// unless it is the backbone of a branch that is still open (the branch is answered from the backbone's calls).
// A consumer group that never comes back keeps its cursor, and so holds retention at that cursor until it returns
// (`rlgate store stats` names it); a store no consumer group has read yet removes nothing. Calls no rollout claims
// (unattributed) are consumed by no one: they go once older than the window, and so do the charts' seconds
// (series.ts).
//
// The sweep runs in small write transactions (a few rollouts or a few hundred calls each) with the event loop free
// between them, so the gateway's own commits wait at most one small transaction. LMDB reuses the pages it frees: the
// file stops growing once the window's worth of rollouts fills it.
import type { Database, Key } from "lmdb";
import type { RolloutRecord } from "./records.ts";
import type { StoreTables } from "./store-tables.ts";

/**
 * One transaction removes at most this many rollouts and this many keys, give or take a rollout's few index entries
 * (a rollout with more calls goes over several transactions). Measured (bench/retention.ts): with 4 and 64 a call's commit during a
 * sweep waited no longer than under the machine's own noise; with 16 and 512 its p99 doubled.
 */
const BATCH_ROLLOUTS = 4;
const BATCH_KEYS = 64;

export interface ConsumerCursor {
  name: string;
  /** Every finished rollout at or below this cursor is acknowledged by the group. */
  committed: number;
}

/** Up to where retention may remove now, and what bounds it. */
export interface RetentionHorizon {
  /** Finish cursors at or below it may be removed (0: none). */
  horizon: number;
  /** The window's edge as a cursor (a microsecond stamp). */
  cutoff: number;
  consumers: ConsumerCursor[];
  /** The consumer group whose cursor, behind the window's edge, bounds retention (null: the window does, or none). */
  heldBy: string | null;
}

/** A finish cursor of a moment (epoch ms): cursors are microsecond stamps (store.ts, nextStamp). */
export function cursorAt(ms: number): number {
  return Math.floor(ms) * 1000;
}

export function consumerCursors(t: Pick<StoreTables, "cursors">): ConsumerCursor[] {
  const out: ConsumerCursor[] = [];
  for (const { key, value } of t.cursors.getRange()) out.push({ name: key, committed: value });
  return out;
}

export function retentionHorizon(
  t: Pick<StoreTables, "cursors" | "finished">,
  retainMs: number,
  now: number,
): RetentionHorizon {
  const consumers = consumerCursors(t);
  const cutoff = cursorAt(now - retainMs);
  if (consumers.length === 0) return { horizon: 0, cutoff, consumers, heldBy: null };
  const slowest = consumers.reduce((a, b) => (b.committed < a.committed ? b : a));
  const horizon = Math.min(cutoff, slowest.committed);
  // It holds retention when a rollout old enough to go waits for its acknowledgement.
  let held = false;
  for (const _ of t.finished.getKeys({ start: horizon + 1, end: cutoff + 1, limit: 1 })) held = true;
  return { horizon, cutoff, consumers, heldBy: held ? slowest.name : null };
}

/** The backbone a branch rollout replays (metadata.branch.of, gateway/branching/spec.ts), or null. */
export function backboneOf(rollout: RolloutRecord | undefined): string | null {
  const of = (rollout?.metadata.branch as { of?: unknown } | undefined)?.of;
  return typeof of === "string" ? of : null;
}

/** Whether a branch of this rollout is open; entries of branches that are finished or gone are dropped (in a write). */
function hasOpenBranch(t: StoreTables, rolloutId: string, write: boolean): boolean {
  const entries: Array<[string, string]> = [];
  for (const key of t.branches.getKeys({ start: [rolloutId] as unknown as [string, string] })) {
    if (key[0] !== rolloutId) break;
    if (t.rollouts.get(key[1])?.status === "open") return true;
    entries.push(key);
  }
  if (write) for (const key of entries) void t.branches.remove(key);
  return false;
}

const newestFirst = (rolloutId: string) => ({
  start: [rolloutId, Number.MAX_SAFE_INTEGER] as [string, number],
  end: [rolloutId, 0] as [string, number],
  reverse: true,
});

// Keys are listed before they are removed: a range is never read while the same transaction changes it.
const rolloutKeys = <K extends [string, number]>(db: { getKeys(o: object): Iterable<K> }, rolloutId: string): K[] => [
  ...db.getKeys({ start: [rolloutId, 0], end: [rolloutId, Number.MAX_SAFE_INTEGER] }),
];

export interface Candidate {
  cursor: number;
  rolloutId: string;
}

/**
 * What one finished-log entry at or below the horizon comes to: `stale` (the rollout was finished again later, or is
 * gone: only the entry goes), `kept` (a backbone with an open branch), else `remove`.
 */
function judge(t: StoreTables, { cursor, rolloutId }: Candidate, write: boolean): "stale" | "kept" | "remove" {
  if (t.finishedIds.get(rolloutId) !== cursor) return "stale";
  if (hasOpenBranch(t, rolloutId, write)) return "kept";
  return "remove";
}

/** Inside a write transaction: removes a finished rollout from every table; returns the keys removed. */
function removeRollout(t: StoreTables, { cursor, rolloutId }: Candidate): { keys: number; calls: number } {
  let keys = 0;
  let calls = 0;
  for (const key of rolloutKeys(t.calls, rolloutId)) {
    void t.calls.remove(key);
    calls++;
  }
  for (const key of rolloutKeys(t.callLog, rolloutId)) {
    void t.callLog.remove(key);
    keys++;
  }
  const record = t.rollouts.get(rolloutId);
  if (record) {
    if (t.keys.get(record.key) === rolloutId) void t.keys.remove(record.key);
    void t.rolloutsByTime.remove([record.createdAt, rolloutId]);
    if (typeof record.deadlineAt === "number") void t.deadlines.remove([record.deadlineAt, rolloutId]);
    const of = backboneOf(record);
    if (of !== null) void t.branches.remove([of, rolloutId]);
    void t.rollouts.remove(rolloutId);
    keys += 4;
  }
  void t.finishedIds.remove(rolloutId);
  void t.finished.remove(cursor);
  return { keys: keys + calls + 2, calls };
}

export interface SweepResult {
  rollouts: number;
  calls: number;
  unattributedCalls: number;
  /** Seconds of the charts' series older than the window. */
  seriesSeconds: number;
  /** Backbones kept because a branch of theirs is open. */
  keptBackbones: number;
  transactions: number;
  ms: number;
  heldBy: string | null;
}

/** Removes what the retention rule allows at `now` (epoch ms), in small transactions. */
export async function sweepRetention(t: StoreTables, retainMs: number, now = Date.now()): Promise<SweepResult> {
  const started = performance.now();
  const result: SweepResult = {
    rollouts: 0,
    calls: 0,
    unattributedCalls: 0,
    seriesSeconds: 0,
    keptBackbones: 0,
    transactions: 0,
    ms: 0,
    heldBy: null,
  };
  let from = 0;
  for (;;) {
    let done = false;
    const removed: string[] = [];
    await t.root.transaction(() => {
      // Read inside the transaction: a consumer group that appeared since the last batch bounds this one too.
      const { horizon, heldBy } = retentionHorizon(t, retainMs, now);
      result.heldBy = heldBy;
      const batch = [...t.finished.getRange({ start: from + 1, end: horizon + 1, limit: BATCH_ROLLOUTS })];
      let keys = 0;
      for (const { key: cursor, value: rolloutId } of batch) {
        if (keys >= BATCH_KEYS) return;
        const verdict = judge(t, { cursor, rolloutId }, true);
        if (verdict === "kept") result.keptBackbones++;
        else if (verdict === "stale") void t.finished.remove(cursor);
        else {
          // A long rollout's calls go over several transactions, newest first: a later call refers to earlier ones,
          // never the other way, so what is left reads whole at every step. The record goes with the last of them.
          const room = BATCH_KEYS - keys;
          const newest = [...t.calls.getKeys({ ...newestFirst(rolloutId), limit: room + 1 })];
          if (newest.length > room) {
            for (const key of newest.slice(0, room)) void t.calls.remove(key);
            result.calls += room;
            return; // the rest of it in the next transaction
          }
          const gone = removeRollout(t, { cursor, rolloutId });
          keys += gone.keys;
          result.calls += gone.calls;
          result.rollouts++;
          removed.push(rolloutId);
        }
        from = cursor;
      }
      done = batch.length < BATCH_ROLLOUTS;
    });
    result.transactions++;
    for (const id of removed) t.forget(id);
    if (done) break;
    await new Promise((resolve) => setImmediate(resolve));
  }
  const cutoff = cursorAt(now - retainMs);
  // Calls without a rollout are stored under "", numbered by a microsecond stamp; series keys are seconds.
  result.unattributedCalls = await sweepKeys(t, t.calls, { start: ["", 0], end: ["", cutoff] }, result);
  result.seriesSeconds = await sweepKeys(t, t.series, { start: 0, end: Math.floor(cutoff / 1e6) }, result);
  await sweepKeys(t, t.seriesMinutes, { start: 0, end: Math.floor(cutoff / 6e7) }, result);
  result.ms = performance.now() - started;
  return result;
}

/** Removes the keys of `table` in `range` (before the window's edge), a batch per transaction; how many. */
async function sweepKeys(
  t: StoreTables,
  table: Database<unknown, Key>,
  range: { start: Key; end: Key },
  result: SweepResult,
): Promise<number> {
  let removed = 0;
  for (;;) {
    let count = 0;
    await t.root.transaction(() => {
      for (const key of [...table.getKeys({ ...range, limit: BATCH_KEYS })]) {
        void table.remove(key);
        count++;
      }
    });
    result.transactions++;
    removed += count;
    if (count < BATCH_KEYS) return removed;
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/** What a sweep at `now` would remove, counted without writing (`rlgate store stats`). */
export function retentionPreview(
  t: StoreTables,
  retainMs: number,
  now = Date.now(),
): { rollouts: number; calls: number; keptBackbones: number; unattributedCalls: number; horizon: RetentionHorizon } {
  const horizon = retentionHorizon(t, retainMs, now);
  let rollouts = 0;
  let calls = 0;
  let keptBackbones = 0;
  for (const { key: cursor, value: rolloutId } of t.finished.getRange({ end: horizon.horizon + 1 })) {
    const verdict = judge(t, { cursor, rolloutId }, false);
    if (verdict === "kept") keptBackbones++;
    if (verdict !== "remove") continue;
    rollouts++;
    calls += t.calls.getKeysCount({ start: [rolloutId, 0], end: [rolloutId, Number.MAX_SAFE_INTEGER] });
  }
  const unattributedCalls = t.calls.getKeysCount({ start: ["", 0], end: ["", horizon.cutoff] });
  return { rollouts, calls, keptBackbones, unattributedCalls, horizon };
}

/** How often a window is swept: a tenth of it, between 1 s and 5 min. */
export function sweepInterval(retainMs: number): number {
  return Math.min(5 * 60_000, Math.max(1000, Math.floor(retainMs / 10)));
}

/** The periodic sweep of a serving gateway (one process per store: the primary with --workers). */
export class RetentionSweep {
  readonly #tables: StoreTables;
  readonly #retainMs: number;
  readonly #log: (line: string) => void;
  #timer: NodeJS.Timeout | null = null;
  #running: Promise<SweepResult> | null = null;
  #stopped = false;
  #lastHeldBy: string | null = null;

  constructor(tables: StoreTables, retainMs: number, log: (line: string) => void = () => {}) {
    this.#tables = tables;
    this.#retainMs = retainMs;
    this.#log = log;
  }

  start(intervalMs = sweepInterval(this.#retainMs)): this {
    const tick = () => {
      this.#timer = null;
      if (this.#stopped) return;
      this.sweep()
        .catch((error: unknown) => this.#log(`retention sweep failed: ${(error as Error).message ?? String(error)}`))
        .finally(() => {
          if (!this.#stopped) (this.#timer = setTimeout(tick, intervalMs)).unref();
        });
    };
    (this.#timer = setTimeout(tick, intervalMs)).unref();
    return this;
  }

  /** One sweep now (a sweep already running is awaited instead). */
  sweep(now?: number): Promise<SweepResult> {
    this.#running ??= sweepRetention(this.#tables, this.#retainMs, now)
      .then((result) => {
        this.#report(result);
        return result;
      })
      .finally(() => (this.#running = null));
    return this.#running;
  }

  #report(r: SweepResult): void {
    if (r.rollouts > 0 || r.unattributedCalls > 0)
      this.#log(
        `retention: removed ${r.rollouts} rollout(s) with ${r.calls} call(s) and ${r.unattributedCalls} unattributed call(s) in ${r.ms.toFixed(0)} ms` +
          (r.keptBackbones > 0 ? `; ${r.keptBackbones} backbone(s) kept for open branches` : ""),
      );
    if (r.heldBy !== this.#lastHeldBy && r.heldBy !== null)
      this.#log(
        `retention: held by consumer group '${r.heldBy}', which has not acknowledged rollouts older than the window (see rlgate store stats)`,
      );
    this.#lastHeldBy = r.heldBy;
  }

  /** Stops sweeping; resolves once a sweep in progress has ended (before the store closes). */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    await this.#running?.catch(() => {});
  }
}
