// Group commit for captured calls (durability "commit"). A commit without fsync costs ~30 µs of fixed work (the
// transaction, its dirty pages and meta page written to the page cache) and ~3 µs per record, so the calls that
// finish in the same turn of the event loop are committed together, right after that turn's I/O callbacks
// (setImmediate). A lone call waits for no timer: its commit runs as soon as the current callbacks return.
// Synchronous commits on the gateway's thread cost less CPU than lmdb-js's asynchronous writer (measured ~0.3 ms a
// call), and each call's promise resolves only after its transaction committed. A store that waits for fsync
// (durability "flush") writes each call in an asynchronous transaction instead (`putFlushed`), with the same check of
// the calls it refers to.
import type { Database, RootDatabase } from "lmdb";
import { referredCalls, type StoredCall } from "./call-codec.ts";
import type { DiskSpace } from "./disk-space.ts";
import type { CallPoint } from "./series.ts";

type CallKey = [string, number];

interface PendingCall {
  key: CallKey;
  stored: StoredCall;
  point: CallPoint;
  resolve: () => void;
  reject: (error: unknown) => void;
}

/** A rollout's calls in the order they were committed: [rolloutKey, index] → call seq (see Store.unseenCalls). */
export type CallLog = Database<number, [string, number]>;

/** The last index of a rollout's commit log (0: none), read in the transaction that appends to it. */
export function lastLogIndex(log: CallLog, rolloutKey: string): number {
  for (const [, index] of log.getKeys({
    start: [rolloutKey, Number.MAX_SAFE_INTEGER],
    end: [rolloutKey, 0],
    reverse: true,
    limit: 1,
  }))
    return index;
  return 0;
}

export class CallCommitter {
  readonly #root: RootDatabase;
  readonly #calls: Database<StoredCall, CallKey>;
  readonly #onFailed: (rolloutIds: string[]) => void;
  readonly #log: CallLog | null;
  readonly #space: Pick<DiskSpace, "failed"> | null;
  readonly #onCommitted: ((points: readonly CallPoint[]) => void) | null;
  #pending: PendingCall[] = [];
  #closed = false;

  /**
   * `onFailed` hears the rollouts of calls that were not stored (a batch whose commit failed, or a call that refers
   * to a call the store lacks); those calls are rejected. With a `log` (a store shared by gateway workers) each call
   * is also appended to its rollout's commit log. With `space`, a batch whose commit fails for lack of space rejects
   * with StoreFullError. `onCommitted` hears the chart figures of the calls committed (series.ts), after the
   * commit. A batch is never refused for the reserve: its calls were admitted before the store filled
   * (their harnesses are waiting for the last byte), and the reserve is there for them.
   */
  constructor(
    root: RootDatabase,
    calls: Database<StoredCall, CallKey>,
    onFailed: (rolloutIds: string[]) => void,
    log: CallLog | null = null,
    space: Pick<DiskSpace, "failed"> | null = null,
    onCommitted: ((points: readonly CallPoint[]) => void) | null = null,
  ) {
    this.#root = root;
    this.#calls = calls;
    this.#onFailed = onFailed;
    this.#log = log;
    this.#space = space;
    this.#onCommitted = onCommitted;
  }

  /** Resolves once the call is committed (with the others of this turn of the event loop). */
  put(key: CallKey, stored: StoredCall, point: CallPoint): Promise<void> {
    if (this.#closed) return Promise.reject(new Error("the store is closed: the call was not recorded"));
    return new Promise((resolve, reject) => {
      if (this.#pending.length === 0) setImmediate(() => this.commitNow());
      this.#pending.push({ key, stored, point, resolve, reject });
    });
  }

  /** Commits what is pending and refuses further calls (the store is closing). */
  close(): void {
    this.commitNow();
    this.#closed = true;
  }

  /** Commits what is pending now (also called before the store closes). */
  commitNow(): void {
    const batch = this.#pending;
    if (batch.length === 0) return;
    this.#pending = [];
    const refused: Array<PendingCall & { missing: number }> = [];
    const stored: PendingCall[] = [];
    try {
      this.#root.transactionSync(() => {
        for (const call of batch) {
          const missing = this.#missingReference(call.key, call.stored);
          if (missing !== undefined) refused.push({ ...call, missing });
          else {
            void this.#calls.put(call.key, call.stored); // applied now, committed with the transaction
            stored.push(call);
          }
        }
        if (this.#log) appendToLog(this.#log, stored);
      });
    } catch (error) {
      const failure = this.#space ? this.#space.failed(error) : error;
      this.#failed(batch, () => failure);
      return;
    }
    this.#onCommitted?.(stored.map((call) => call.point));
    for (const call of stored) call.resolve();
    if (refused.length > 0) this.#failed(refused, ({ key, missing }) => notRecorded(key, missing));
  }

  /**
   * The same check and write for a store that waits for fsync (durability "flush"), in an asynchronous transaction:
   * lmdb-js's writer thread commits it, so the event loop does not wait for the disk.
   */
  async putFlushed(key: CallKey, stored: StoredCall, point: CallPoint): Promise<void> {
    let missing: number | undefined;
    try {
      await this.#root.transaction(() => {
        missing = this.#missingReference(key, stored);
        if (missing === undefined) void this.#calls.put(key, stored);
      });
    } catch (error) {
      this.#onFailed([key[0]]);
      throw error;
    }
    if (missing !== undefined) {
      this.#onFailed([key[0]]);
      throw notRecorded(key, missing);
    }
    this.#onCommitted?.([point]);
  }

  /**
   * A prompt or body stored as a reference is only as good as the call it refers to: a call whose reference the store
   * lacks is never committed (it would make its rollout's calls unreadable). Read inside the write transaction, which
   * sees the calls put before it in the same batch.
   */
  #missingReference(key: CallKey, stored: StoredCall): number | undefined {
    return referredCalls(stored).find((seq) => !this.#calls.doesExist([key[0], seq]));
  }

  /** Rejects calls that were not stored; their rollouts' prompt indexes are rebuilt from what the store holds. */
  #failed<C extends PendingCall>(calls: readonly C[], error: (call: C) => unknown): void {
    this.#onFailed([...new Set(calls.map((call) => call.key[0]))]);
    for (const call of calls) call.reject(error(call));
  }
}

function notRecorded([rolloutId, seq]: CallKey, missing: number): Error {
  return new Error(
    `call ${seq} of rollout ${rolloutId} was not recorded: it refers to call ${missing}, which is not in the store`,
  );
}

/** Appends a batch's calls to their rollouts' commit logs (inside the batch's transaction: indexes in commit order). */
function appendToLog(log: CallLog, batch: readonly PendingCall[]): void {
  const last = new Map<string, number>();
  for (const { key } of batch) {
    const [rolloutKey, seq] = key;
    const index = (last.get(rolloutKey) ?? lastLogIndex(log, rolloutKey)) + 1;
    last.set(rolloutKey, index);
    void log.put([rolloutKey, index], seq);
  }
}
