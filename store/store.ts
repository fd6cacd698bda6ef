// The durable store: one LMDB environment holding rollouts, rollout keys and captured calls.
// Writes are committed by lmdb-js on its writer thread; a put's promise resolves once the transaction is committed.
//   durability "commit" (default): committed into the OS page cache (safe from a gateway crash or SIGKILL); the OS
//     writes it to disk on its own schedule. Calls are group-committed on the gateway's thread: every call that
//     finishes in one turn of the event loop shares one transaction (see `CallCommitter`).
//   durability "flush": each commit also waits for fsync (safe from a machine crash). Measured: ~0.6 ms a commit.
import { EventEmitter } from "node:events";
import { LRUCache } from "lru-cache";
import { open, type Database, type RootDatabase } from "lmdb";
import type { CallTokens, PromptRefIndex, SeenCalls } from "./call-tokens.ts";
import { CallDecoder, encodeCall, receivedBytes, storedResponse, type StoredCall } from "./call-codec.ts";
import { RequestBases } from "./request-bodies.ts";
import { CallTokensDecoder } from "./call-tokens-decoder.ts";
import { CallCommitter, lastLogIndex, type CallLog } from "./call-committer.ts";
import {
  decodeCursor,
  encodeCursor,
  entryMatches,
  isFiltered,
  rolloutIndexEntry,
  type RolloutIndexEntry,
  type RolloutPage,
  type RolloutPageRequest,
} from "./rollout-search.ts";
import { callPoint, lastActivity, readSeries, SeriesRecorder, type SeriesPoint, type SeriesTables } from "./series.ts";
import { DiskSpace, type DiskSpaceOptions, type StoreFullError } from "./disk-space.ts";
import type { CallRecord, RolloutRecord } from "./records.ts";
import type { StoreTables } from "./store-tables.ts";
import { pageUse } from "./store-stats.ts";
import { sliceRouting } from "../util/routed-experts.ts";
import { reweigh } from "../util/lru-reweigh.ts";
import {
  MAX_AGREEMENT_RECORDS,
  MAX_REPLAY_RECORDS,
  ReportLog,
  type AgreementRecord,
  type ReplayRecord,
  type ReplaySummary,
} from "./reports.ts";

export type Durability = "commit" | "flush";

/** An RL group's member in a consumer group, kept until the group's rollouts are well behind its committed cursor. */
export interface GroupAffinity {
  member: string;
  /** The group's highest cursor leased so far. */
  last: number;
}

/** What a consumer group keeps beyond its committed cursor (see gateway/grpc/consumer-group.ts). */
export interface ConsumerState {
  /** Cursor → the member it is leased to. */
  leases: Map<number, string>;
  /** Acked cursors above the committed cursor. */
  acked: number[];
  /** Affinity key (`group:…`) → its member. */
  affinity: Map<string, GroupAffinity>;
}

/** Changes to a consumer group's state, written in one transaction: null / false removes an entry. */
export interface ConsumerStateChanges {
  committed?: number;
  leases: ReadonlyMap<number, string | null>;
  acked: ReadonlyMap<number, boolean>;
  affinity: ReadonlyMap<string, GroupAffinity | null>;
}

type ConsumerStateKey = [consumer: string, kind: "lease" | "ack" | "affinity", id: number | string];

export interface StoreOptions {
  path: string;
  durability?: Durability;
  /** Stores each prompt as a reference to its longest stored prefix plus its new tokens (see call-tokens.ts). */
  promptIndex?: PromptRefIndex;
  /**
   * Other processes write the same environment (`rlgate serve --workers N`): this one is worker `slot` of `slots`.
   * Call numbers are then unique across them (each takes the stamps ≡ slot mod slots), an open rollout is read from
   * the store on every look-up (another worker may have finished it), and what is cached per rollout is checked
   * against the calls other workers stored: each call is also appended to its rollout's commit log (see
   * `unseenCalls`).
   */
  shared?: { slot: number; slots: number };
  /**
   * Bytes of address space the environment's memory map reserves (default `DEFAULT_MAP_SIZE`): a store that stays
   * below it is never remapped (see `environmentOptions`). Every opener in the process passes the same value.
   */
  mapSize?: number;
  /** The free-space reserve below which writes are refused, and where entering / leaving that state is logged. */
  space?: Omit<DiskSpaceOptions, "path">;
}

/** Calls without a rollout are kept under this key so they still sort and list together. */
const UNATTRIBUTED = "";

/** The keys of one rollout's calls (call numbers are below 2^53). */
const callRange = (rolloutKey: string) => ({
  start: [rolloutKey, 0] as [string, number],
  end: [rolloutKey, Number.MAX_SAFE_INTEGER] as [string, number],
});

/** Rollout records kept decoded in memory (most recently used). */
const ROLLOUT_CACHE_SIZE = 4096;

/**
 * The next of an increasing series of numbers: microseconds since the epoch, bumped by one when two fall in the same
 * microsecond. Unique and increasing across restarts without reading anything back from the store.
 */
function nextStamp(last: number): number {
  return Math.max(last + 1, Date.now() * 1000);
}

/** The next stamp ≡ slot (mod slots): processes writing one store never draw the same number. */
export function nextSlotStamp(last: number, slot: number, slots: number): number {
  const stamp = nextStamp(last);
  return stamp + ((slot - (stamp % slots) + slots) % slots);
}

/**
 * The memory map's default size: 1 TiB of virtual address space, not of disk. lmdb-js starts a fresh environment's map
 * at 128 KiB and, whenever a transaction needs pages past it, remaps the environment from whichever thread begins that
 * transaction — the writer, the trajectory thread's readers, other workers' processes — with no lock between them
 * (node_modules/lmdb/dependencies/lmdb/libraries/liblmdb/mdb.c: mdb_env_set_mapsize from mdb_page_alloc and
 * mdb_txn_renew0). A map this size is set once at open and never changes while the store is below it, so no process
 * remaps a shared environment under another's transactions. Without LMDB's write map it costs nothing but address
 * space: the file grows with what is written (docs/deploy.md, "Store map size").
 */
export const DEFAULT_MAP_SIZE = 2 ** 40;

/**
 * How a store opens its LMDB environment. Every opener of the same path in one process must pass the same options (the
 * process shares one environment per path). Never LMDB's write map: with it the file is ftruncated to the map's size,
 * sparse, and a page written into a hole on a full disk kills the process with SIGBUS; without it a full disk fails a
 * commit's pwrite with ENOSPC, which aborts the transaction and leaves the store as it was.
 */
export function environmentOptions(path: string, durability: Durability, mapSize = DEFAULT_MAP_SIZE) {
  // lmdb-js's event-turn batching starts each batch with a write whose promise it drops itself; when that batch's
  // commit fails (a full disk) the promise is an unhandled rejection. Without it, asynchronous writes are still batched
  // (those of one turn of the event loop commit together), and every failed write rejects only what its caller awaits.
  return { path, compression: false, maxDbs: 16, noSync: durability === "commit", mapSize, eventTurnBatching: false };
}

/**
 * What a store announces once it is committed: `rollout` (a RolloutRecord, when created or finished) and `call` (a
 * CallRecord). The live UI listens; nothing is built for an event nobody listens to.
 */
export interface StoreEvents {
  rollout: [RolloutRecord];
  call: [CallRecord];
  agreement: [AgreementRecord];
  replay: [ReplaySummary];
}

export class Store {
  readonly path: string;
  readonly events = new EventEmitter<StoreEvents>();
  readonly #root: RootDatabase;
  readonly #rollouts: Database<RolloutRecord, string>;
  /**
   * [createdAt, id] of every rollout, with the fields a search reads: the newest are listed, and all searched, without
   * reading the records (rollout-search.ts).
   */
  readonly #rolloutsByTime: Database<RolloutIndexEntry, [number, string]>;
  /** Per second: the calls that started and the rollouts that finished in it (series.ts), for the live page's charts. */
  readonly #series: SeriesTables;
  readonly #seriesRecorder: SeriesRecorder;
  readonly #keys: Database<string, string>;
  readonly #calls: Database<StoredCall, [string, number]>;
  readonly #callLog: CallLog;
  readonly #finished: Database<string, number>;
  /** Rollout id → its finish cursor: a cached open rollout is checked against it without reading the record. */
  readonly #finishedIds: Database<number, string>;
  /** [deadlineAt, id] of every open rollout with a deadline: the due ones are found without reading the others. */
  readonly #deadlines: Database<true, [number, string]>;
  readonly #cursors: Database<number, string>;
  readonly #consumerState: Database<string | true | GroupAffinity, ConsumerStateKey>;
  /** [backbone id, branch id] of every branch rollout: retention keeps a backbone while a branch of it is open. */
  readonly #branches: Database<true, [string, string]>;
  #lastFinishCursor = 0;
  readonly #durability: Durability;
  /** Each rollout's recent request bodies, which a new call's body is stored against (request-bodies.ts). */
  readonly #requestBases = new RequestBases();
  readonly #prompts: PromptRefIndex | null;
  readonly #committer: CallCommitter;
  // Every captured call looks its rollout up (attribution, prompt references): decoded records are kept here, frozen,
  // filled on reads when no write of the rollout is in flight (so a failed write leaves the stored record in view).
  readonly #rolloutCache = new LRUCache<string, RolloutRecord>({ max: ROLLOUT_CACHE_SIZE });
  // Rollouts with a write in flight: read from the store (which shows the write once committed), never cached.
  readonly #rolloutWrites = new Map<string, number>();
  #lastSeq = 0;
  readonly #reports: ReportLog;
  readonly #reportsTable: ConstructorParameters<typeof ReportLog>[0];
  #lastReportId = 0;
  /**
   * Shared store: per open rollout, a decoder that keeps the calls it decoded, so catching up on another worker's
   * call decodes only that call (a prompt refers to an earlier call's tokens, decoded already) instead of its chain.
   */
  readonly #catchUpDecoders = new LRUCache<string, CallTokensDecoder>({ max: 256 });
  readonly #shared: { slot: number; slots: number } | null;
  /** The memory map's size (`StoreOptions.mapSize`): other openers in this process pass the same. */
  readonly mapSize: number;
  readonly #space: DiskSpace;

  constructor(options: StoreOptions) {
    this.path = options.path;
    this.#shared = options.shared ?? null;
    this.#durability = options.durability ?? "commit";
    this.#prompts = options.promptIndex ?? null;
    this.mapSize = options.mapSize ?? DEFAULT_MAP_SIZE;
    this.#space = new DiskSpace({ path: options.path, ...options.space, reusableBytes: () => this.#reusableBytes() });
    this.#root = open(environmentOptions(options.path, this.#durability, this.mapSize));
    this.#rollouts = this.#root.openDB<RolloutRecord, string>({ name: "rollouts" });
    this.#keys = this.#root.openDB<string, string>({ name: "rollout-keys" });
    this.#rolloutsByTime = this.#root.openDB<RolloutIndexEntry, [number, string]>({ name: "rollouts-by-time" });
    // A store written before this index existed gets it once, on open.
    if (this.#rolloutsByTime.getCount() !== this.#rollouts.getCount()) {
      this.#root.transactionSync(() => {
        for (const { key, value } of this.#rollouts.getRange())
          void this.#rolloutsByTime.put([value.createdAt, key], rolloutIndexEntry(value));
      });
    }
    this.#calls = this.#root.openDB<StoredCall, [string, number]>({ name: "calls" });
    this.#finished = this.#root.openDB<string, number>({ name: "finished" });
    this.#finishedIds = this.#root.openDB<number, string>({ name: "finished-ids" });
    this.#deadlines = this.#root.openDB<true, [number, string]>({ name: "rollout-deadlines" });
    this.#cursors = this.#root.openDB<number, string>({ name: "consumer-cursors" });
    // Leases, acks above the committed cursor and RL-group affinities of each consumer group: with them a restarted
    // gateway keeps a member's rollouts (and groups) for that member instead of guessing who held what.
    this.#consumerState = this.#root.openDB({ name: "consumer-state" });
    this.#branches = this.#root.openDB({ name: "branches" });
    for (const key of this.#finished.getKeys({ reverse: true, limit: 1 })) this.#lastFinishCursor = key;
    this.#reportsTable = this.#root.openDB({ name: "reports" });
    this.#reports = new ReportLog(this.#reportsTable);
    // A failed group commit rejects its calls; their rollouts' prompt indexes (which already hold them) are rebuilt
    // from the store, so no later call is stored as a reference to a call that is not there.
    // Written by the workers of a shared store only: per rollout, its calls in commit order (see unseenCalls).
    this.#callLog = this.#root.openDB({ name: "call-log" });
    this.#series = {
      seconds: this.#root.openDB({ name: "call-series" }),
      minutes: this.#root.openDB({ name: "call-series-minutes" }),
    };
    const recorder = (this.#seriesRecorder = new SeriesRecorder(this.#root, this.#series));
    this.#committer = new CallCommitter(
      this.#root,
      this.#calls,
      (rolloutIds) => {
        for (const id of rolloutIds) {
          this.#prompts?.forget(id);
          this.#requestBases.forget(id);
        }
      },
      this.#shared ? this.#callLog : null,
      this.#space,
      (points) => {
        for (const point of points) recorder.addCall(point);
      },
    );
  }

  /** Reserves the next call number (a stamp: see `nextStamp`). */
  nextCallSeq(): number {
    this.#lastSeq = this.#stamp(this.#lastSeq);
    return this.#lastSeq;
  }

  /** The next stamp after `last`; in a shared store, one that no other worker draws. */
  #stamp(last: number): number {
    const shared = this.#shared;
    return shared ? nextSlotStamp(last, shared.slot, shared.slots) : nextStamp(last);
  }

  /** When a put resolves: committed (default), or committed and on disk. */
  get durability(): Durability {
    return this.#durability;
  }

  /** Whether other processes write this environment too (gateway workers). */
  get shared(): boolean {
    return this.#shared !== null;
  }

  /**
   * Starts a write unless the store's disk is full (then nothing is written and the write is refused with
   * StoreFullError, as is a write that fails for lack of space); resolves once committed (and flushed, with durability
   * "flush"). A call admitted before the disk filled (`admitted`) is written into the reserve, not refused.
   */
  async #settle(write: () => Promise<unknown>, admitted = false): Promise<void> {
    const refusal = admitted ? null : this.#space.refusal();
    if (refusal) throw refusal;
    try {
      await write();
      if (this.#durability === "flush") await this.#root.flushed;
    } catch (error) {
      throw this.#space.failed(error);
    }
  }

  /** Why a write would be refused now (its disk is full), or null: the gateway refuses a call before it goes upstream. */
  writeRefusal(): StoreFullError | null {
    return this.#space.refusal();
  }

  putRollout(rollout: RolloutRecord): Promise<void> {
    return this.#announce(
      "rollout",
      rollout,
      this.#writeRollout(
        rollout.id,
        this.#settle(() =>
          this.#root.transaction(() => {
            // Inside a transaction lmdb applies each put at once; their promises are the transaction's, settled below.
            void this.#rollouts.put(rollout.id, rollout);
            void this.#keys.put(rollout.key, rollout.id);
            void this.#rolloutsByTime.put([rollout.createdAt, rollout.id], rolloutIndexEntry(rollout));
            this.#indexDeadline(rollout);
            this.#indexBranch(rollout);
          }),
        ),
      ),
    );
  }

  /**
   * `putRollout` for a new rollout: false (nothing written) when the store holds one with its id already, created by
   * a concurrent request (on another gateway worker) since the caller looked. Checked inside the write transaction.
   */
  async putNewRollout(rollout: RolloutRecord): Promise<boolean> {
    let created = false;
    await this.#writeRollout(
      rollout.id,
      this.#settle(() =>
        this.#root.transaction(() => {
          if (this.#rollouts.doesExist(rollout.id)) return;
          created = true;
          void this.#rollouts.put(rollout.id, rollout);
          void this.#keys.put(rollout.key, rollout.id);
          void this.#rolloutsByTime.put([rollout.createdAt, rollout.id], rolloutIndexEntry(rollout));
          this.#indexDeadline(rollout);
          this.#indexBranch(rollout);
        }),
      ),
    );
    if (created && this.events.listenerCount("rollout") > 0) this.#emit("rollout", rollout);
    return created;
  }

  /**
   * Emits `event` once `write` is committed, when someone listens, and hands `write` back unchanged: a listener never
   * delays or fails a write (a listener's own failure is dropped here, never turned into a failed capture).
   */
  #announce<E extends keyof StoreEvents>(event: E, record: StoreEvents[E][0], write: Promise<void>): Promise<void> {
    if (this.events.listenerCount(event) === 0) return write;
    write.then(
      () => this.#emit(event, record),
      () => {},
    );
    return write;
  }

  #emit<E extends keyof StoreEvents>(event: E, record: StoreEvents[E][0]): void {
    try {
      (this.events.emit as (e: E, r: StoreEvents[E][0]) => boolean)(event, record);
    } catch {
      // the listener's failure, not the store's
    }
  }

  /** Inside a write transaction: an open rollout with a deadline is listed by it (`dueRollouts`). */
  #indexDeadline(rollout: RolloutRecord): void {
    if (rollout.status === "open" && typeof rollout.deadlineAt === "number")
      void this.#deadlines.put([rollout.deadlineAt, rollout.id], true);
  }

  /** Inside a write transaction: a branch rollout (metadata.branch.of) is listed under its backbone. */
  #indexBranch(rollout: RolloutRecord): void {
    const of = (rollout.metadata.branch as { of?: unknown } | undefined)?.of;
    if (typeof of === "string") void this.#branches.put([of, rollout.id], true);
  }

  /** Keeps the rollout out of the cache while `write` is in flight (readers see the store's committed state). */
  async #writeRollout(id: string, write: Promise<void>): Promise<void> {
    this.#rolloutCache.delete(id);
    this.#rolloutWrites.set(id, (this.#rolloutWrites.get(id) ?? 0) + 1);
    try {
      await write;
    } finally {
      const left = this.#rolloutWrites.get(id)! - 1;
      if (left === 0) this.#rolloutWrites.delete(id);
      else this.#rolloutWrites.set(id, left);
    }
  }

  #cacheRollout(rollout: RolloutRecord): void {
    this.#rolloutCache.set(rollout.id, Object.freeze({ ...rollout }));
  }

  /**
   * Records a rollout's end and appends it to the finished log, in one transaction. The log is what trajectory
   * consumers read from a cursor (at least once, resumable): cursors increase across restarts, and in commit order
   * across processes (the cursor is drawn inside the write transaction, which LMDB runs one at a time), so a reader
   * that has seen a cursor has seen every lower one.
   */
  finishRollout(rollout: RolloutRecord): Promise<number> {
    return this.#finish(rollout, false) as Promise<number>;
  }

  /** `finishRollout`, unless the store holds the rollout as finished already: then nothing is written, null returned. */
  finishOpenRollout(rollout: RolloutRecord): Promise<number | null> {
    return this.#finish(rollout, true);
  }

  #finish(rollout: RolloutRecord, ifOpen: boolean): Promise<number | null> {
    this.#prompts?.forget(rollout.id);
    this.#catchUpDecoders.delete(rollout.id);
    let cursor: number | null = null;
    const write = this.#writeRollout(
      rollout.id,
      this.#settle(() =>
        this.#root.transaction(() => {
          const stored = this.#rollouts.get(rollout.id);
          if (ifOpen && stored?.status !== "open") return;
          // A finished rollout has no deadline left to keep.
          if (typeof stored?.deadlineAt === "number") void this.#deadlines.remove([stored.deadlineAt, rollout.id]);
          let next = nextStamp(this.#lastFinishCursor);
          for (const last of this.#finished.getKeys({ reverse: true, limit: 1 })) next = Math.max(next, last + 1);
          this.#lastFinishCursor = cursor = next;
          void this.#rollouts.put(rollout.id, rollout);
          void this.#finished.put(next, rollout.id);
          void this.#finishedIds.put(rollout.id, next);
          void this.#rolloutsByTime.put([rollout.createdAt, rollout.id], rolloutIndexEntry(rollout));
          // A finished rollout's caches are dropped: its commit log is no longer read.
          for (const key of this.#callLog.getKeys({
            start: [rollout.id, 0],
            end: [rollout.id, Number.MAX_SAFE_INTEGER],
          }))
            void this.#callLog.remove(key);
        }),
      ),
    );
    return write.then(() => {
      if (cursor !== null) this.#seriesRecorder.addFinish(rollout);
      if (cursor !== null && this.events.listenerCount("rollout") > 0) this.#emit("rollout", rollout);
      return cursor;
    });
  }

  /**
   * The rollout's cursor in the finished log (null while it is open): the order rollouts finished in, exactly, where
   * `finishedAt` (ms) ties when many finish at once.
   */
  finishCursor(rolloutId: string): number | null {
    return this.#finishedIds.get(rolloutId) ?? null;
  }

  /**
   * Open rollouts whose deadline is at or before `now` (epoch ms), earliest first, at most `limit`. Read from a new
   * snapshot: in a shared store another worker may have created (or finished) them a moment ago. An entry may be
   * stale (its rollout re-put with another deadline): the caller checks the record.
   */
  dueRollouts(now: number, limit = 100): Array<{ deadlineAt: number; rolloutId: string }> {
    this.#root.resetReadTxn();
    const out: Array<{ deadlineAt: number; rolloutId: string }> = [];
    for (const [deadlineAt, rolloutId] of this.#deadlines.getKeys({
      end: [Math.floor(now) + 1] as unknown as [number, string], // deadlines are whole ms: every id of `now` too
      limit,
    }))
      out.push({ deadlineAt, rolloutId });
    return out;
  }

  /** Removes a deadline entry whose rollout no longer has that deadline (see `dueRollouts`). */
  dropDeadline(deadlineAt: number, rolloutId: string): Promise<void> {
    return this.#settle(() => this.#deadlines.remove([deadlineAt, rolloutId]));
  }

  /** Finished rollouts after `cursor`, oldest first. */
  finishedAfter(cursor: number, limit = 100): Array<{ cursor: number; rolloutId: string }> {
    const out: Array<{ cursor: number; rolloutId: string }> = [];
    for (const { key, value } of this.#finished.getRange({ start: cursor + 1, limit }))
      out.push({ cursor: key, rolloutId: value });
    return out;
  }

  /** Records a trainer's agreement figures (an RL core sent them); the UI charts them. */
  putAgreement(record: Omit<AgreementRecord, "id">): Promise<AgreementRecord> {
    const full = { ...record, id: (this.#lastReportId = this.#stamp(this.#lastReportId)) };
    const write = this.#settle(() => this.#reports.put("agreement", full, MAX_AGREEMENT_RECORDS));
    return this.#announce("agreement", full, write).then(() => full);
  }

  /** The newest agreement records, oldest first. */
  listAgreement(limit = 1000): AgreementRecord[] {
    return this.#reports.list("agreement", limit);
  }

  /** Records a replay run's report; the UI lists it. */
  putReplay(record: Omit<ReplayRecord, "id">): Promise<ReplayRecord> {
    const full = { ...record, id: (this.#lastReportId = this.#stamp(this.#lastReportId)) };
    const { calls: _calls, ...summary } = full;
    const write = this.#settle(() => this.#reports.put("replay", full, MAX_REPLAY_RECORDS));
    return this.#announce("replay", summary, write).then(() => full);
  }

  /** The newest replay runs without their per-call figures, oldest first. */
  listReplays(limit = 100): ReplaySummary[] {
    return this.#reports.list<ReplayRecord>("replay", limit).map(({ calls: _calls, ...summary }) => summary);
  }

  getReplay(id: number): ReplayRecord | undefined {
    return this.#reports.get("replay", id);
  }

  /** A trajectory consumer group's committed cursor into the finished log (0 when it has none yet). */
  getCursor(consumer: string): number {
    return this.#cursors.get(consumer) ?? 0;
  }

  /** A consumer group's leases, acks above its committed cursor and group affinities, as last written. */
  getConsumerState(consumer: string): ConsumerState {
    const state: ConsumerState = { leases: new Map(), acked: [], affinity: new Map() };
    for (const { key, value } of this.#consumerState.getRange({ start: [consumer] as unknown as ConsumerStateKey })) {
      const [owner, kind, id] = key;
      if (owner !== consumer) break;
      if (kind === "lease" && typeof id === "number" && typeof value === "string") state.leases.set(id, value);
      else if (kind === "ack" && typeof id === "number") state.acked.push(id);
      else if (kind === "affinity" && typeof id === "string" && typeof value === "object")
        state.affinity.set(id, value);
    }
    return state;
  }

  /**
   * Writes changes to a consumer group's state and its committed cursor in one transaction (the group batches them:
   * one write per batch, never one per call or ack).
   */
  writeConsumerState(consumer: string, changes: ConsumerStateChanges): Promise<void> {
    return this.#settleAdmitted(() =>
      this.#root.transaction(() => {
        if (changes.committed !== undefined) void this.#cursors.put(consumer, changes.committed);
        for (const [cursor, member] of changes.leases) {
          if (member === null) void this.#consumerState.remove([consumer, "lease", cursor]);
          else void this.#consumerState.put([consumer, "lease", cursor], member);
        }
        for (const [cursor, acked] of changes.acked) {
          if (acked) void this.#consumerState.put([consumer, "ack", cursor], true);
          else void this.#consumerState.remove([consumer, "ack", cursor]);
        }
        for (const [key, affinity] of changes.affinity) {
          if (affinity === null) void this.#consumerState.remove([consumer, "affinity", key]);
          else void this.#consumerState.put([consumer, "affinity", key], affinity);
        }
      }),
    );
  }

  /**
   * A consumer group's state is written even into the reserve: a few keys, and an acknowledgement is what lets
   * retention make room in a full store.
   */
  #settleAdmitted(write: () => Promise<unknown>): Promise<void> {
    return this.#settle(write, true);
  }

  /**
   * A rollout's record (shared and frozen: write changes with putRollout / finishRollout). In a shared store an open
   * rollout in the cache is checked each time, on a new read snapshot, against the finish marker another worker may
   * have written a moment ago.
   */
  getRollout(id: string): RolloutRecord | undefined {
    const cached = this.#rolloutCache.get(id);
    if (cached && !this.#shared) return cached;
    if (cached) {
      // Another worker may have finished it a moment ago, or retention (in the primary) removed it since: either shows
      // in its finish marker, checked on a new read snapshot.
      this.#root.resetReadTxn();
      if (this.#finishedIds.doesExist(id) === (cached.status !== "open")) return cached;
      this.#rolloutCache.delete(id);
    } else if (this.#shared) this.#root.resetReadTxn();
    const stored = this.#rollouts.get(id);
    if (!stored || this.#rolloutWrites.has(id)) return stored;
    this.#cacheRollout(stored);
    return this.#rolloutCache.get(id);
  }

  /**
   * Where a rollout's commit log ends now: a cache filled from the store's calls after this reads the log on from it.
   * Read from a new snapshot. 0 when the store is not shared (the log is written only then).
   */
  callLogMark(rolloutId: string): number {
    if (!this.#shared) return 0;
    this.#root.resetReadTxn();
    return lastLogIndex(this.#callLog, rolloutId);
  }

  /**
   * Seqs of the calls other workers of a shared store committed for a rollout since `seen.mark` that `seen` lacks, in
   * commit order; `seen.mark` moves past them. Reads only the log's new entries (usually none or one), from a new
   * snapshot. None when the store is not shared: then every call went through this process.
   */
  unseenCalls(rolloutId: string, seen: SeenCalls): number[] {
    if (!this.#shared) return [];
    this.#root.resetReadTxn();
    const out: number[] = [];
    for (const { key, value } of this.#callLog.getRange({
      start: [rolloutId, seen.mark + 1],
      end: [rolloutId, Number.MAX_SAFE_INTEGER],
    })) {
      seen.mark = key[1];
      if (!seen.seqs.has(value)) out.push(value);
    }
    return out;
  }

  /** The calls of `unseenCalls`, decoded (their prompts continue what the rollout's earlier catch-ups decoded). */
  unseenCallRecords(rolloutId: string, seen: SeenCalls): CallRecord[] {
    const unseen = this.unseenCalls(rolloutId, seen);
    if (unseen.length === 0) return [];
    // Those who catch up (repair, token threads) read no request body: decoded only if read.
    const decoder = new CallDecoder(this.#callLookup(rolloutId), this.#catchUpDecoder(rolloutId), {
      bodiesWhenRead: true,
    });
    return unseen.flatMap((seq) => {
      const stored = this.#calls.get([rolloutId, seq]);
      return stored ? [decoder.decode(stored)] : [];
    });
  }

  /**
   * A per-rollout state made from the rollout's stored calls, kept in `cache`: built from them when `cache` lacks it,
   * and in a shared store (gateway workers) given first the calls other workers committed since, so it is current
   * whichever worker served the call before. `add` is offered every record once or more (it skips seqs it has seen).
   */
  followCalls<T extends { seen: SeenCalls }>(
    cache: LRUCache<string, T>,
    rolloutId: string,
    create: () => T,
    add: (state: T, record: CallRecord) => void,
  ): T {
    let state = cache.get(rolloutId);
    if (state === undefined) {
      state = create();
      state.seen.mark = this.callLogMark(rolloutId); // before the listing: later commits are caught up next time
      for (const record of this.listCalls(rolloutId)) add(state, record);
      cache.set(rolloutId, state);
    } else if (this.#shared) {
      const records = this.unseenCallRecords(rolloutId, state.seen);
      for (const record of records) add(state, record);
      if (records.length > 0) reweigh(cache, rolloutId, state); // a cache that weighs its entries weighs it again
    }
    return state;
  }

  #catchUpDecoder(rolloutId: string): CallTokensDecoder {
    let decoder = this.#catchUpDecoders.get(rolloutId);
    if (!decoder) this.#catchUpDecoders.set(rolloutId, (decoder = new CallTokensDecoder(this.#callLookup(rolloutId))));
    return decoder;
  }

  /**
   * The newest of a rollout's calls (looking at `limit` at most) of surface `api` that completed ok and whose response
   * (as delivered) `test` accepts; only those responses are parsed, only the one found is decoded whole.
   */
  findCall(
    rolloutId: string | null,
    api: CallRecord["api"],
    test: (response: unknown) => boolean,
    limit = 10_000,
  ): CallRecord | undefined {
    const key = rolloutId ?? UNATTRIBUTED;
    const { start, end } = callRange(key);
    for (const { value } of this.#calls.getRange({ start: end, end: start, reverse: true, limit })) {
      if (value.api !== api || value.status !== "ok") continue;
      let response: unknown;
      try {
        response = storedResponse(value.response);
      } catch {
        continue;
      }
      if (test(response)) return this.#decoder(key).decode(value);
    }
    return undefined;
  }

  rolloutIdForKey(key: string): string | undefined {
    return this.#keys.get(key);
  }

  /** Rollouts, newest first; reads only as many as it takes to find `limit` that match. */
  listRollouts(options: { limit?: number; status?: string; group?: string } = {}): RolloutRecord[] {
    const out: RolloutRecord[] = [];
    // Another worker may have finished a rollout this one holds cached as open: read on a new snapshot, where its
    // finish marker says so.
    if (this.#shared) this.#root.resetReadTxn();
    for (const [, id] of this.#rolloutsByTime.getKeys({ reverse: true })) {
      const value = this.#listed(id);
      if (!value) continue;
      if (options.status && value.status !== options.status) continue;
      if (options.group && value.group !== options.group) continue;
      out.push(value);
      if (options.limit && out.length >= options.limit) break;
    }
    return out;
  }

  /** A rollout for a listing: from the cache unless another worker finished it since (then from the store). */
  #listed(id: string): RolloutRecord | undefined {
    const value = this.#rolloutCache.peek(id); // a listing does not churn the cache
    if (!value || (this.#shared && value.status === "open" && this.#finishedIds.doesExist(id)))
      return this.#rollouts.get(id);
    return value;
  }

  /**
   * A page of rollouts, newest first, after `cursor`, that match the filter, with how many match in the whole store
   * (rollout-search.ts). A cursor that is not one is a RangeError.
   */
  pageRollouts(request: RolloutPageRequest = {}): RolloutPage {
    const after = request.cursor ? decodeCursor(request.cursor) : null;
    if (request.cursor && !after) throw new RangeError(`cursor: '${request.cursor}' is not a page's next_cursor`);
    const filtered = isFiltered(request);
    const limit = request.limit ?? Infinity;
    if (this.#shared) this.#root.resetReadTxn();
    const rollouts: RolloutRecord[] = [];
    let total = 0;
    let last: [number, string] | null = null;
    let more = false;
    // Unfiltered, the page starts at the cursor and the total is the entry count; filtered, every entry is looked at
    // once, to count the matches.
    const range = after && !filtered ? { reverse: true, start: after } : { reverse: true };
    for (const { key, value } of this.#rolloutsByTime.getRange(range)) {
      if (filtered && !entryMatches(key[1], value, request, () => this.#listed(key[1]))) continue;
      total++;
      if (after && (key[0] > after[0] || (key[0] === after[0] && key[1] >= after[1]))) continue;
      if (rollouts.length >= limit) {
        more = true;
        if (filtered) continue;
        break;
      }
      const record = this.#listed(key[1]);
      if (!record) continue;
      rollouts.push(record);
      last = key;
    }
    if (!filtered) total = this.#rolloutsByTime.getCount();
    return { rollouts, total, nextCursor: more && last ? encodeCursor(last) : null };
  }

  /**
   * The charts' figures: `windows` windows of `stepMs` up to `to` (epoch ms; series.ts). `lastActivity` is the newest
   * second anything happened in, so a page opened after a run shows that run.
   */
  series(to: number, stepMs: number, windows: number): SeriesPoint[] {
    this.#seriesRecorder.flush();
    if (this.#shared) this.#root.resetReadTxn();
    return readSeries(this.#series, to, stepMs, windows);
  }

  lastActivity(): number | null {
    this.#seriesRecorder.flush();
    if (this.#shared) this.#root.resetReadTxn();
    return lastActivity(this.#series.seconds);
  }

  /** Resolves once the call is committed; the gateway awaits this before the harness gets its last byte. */
  putCall(call: CallRecord): Promise<void> {
    const key: [string, number] = [call.rolloutId ?? UNATTRIBUTED, call.seq];
    const received = receivedBytes(call);
    // Bodies refer to earlier calls only where a failed commit tells the store (group commit), and a rollout has them.
    const body =
      this.#durability === "commit" && call.rolloutId !== null
        ? this.#requestBases.plan(key[0], call.seq, received)
        : null;
    const stored = encodeCall(call, this.#promptRef(call), body?.stored ?? received);
    body?.remember();
    const point = callPoint(call);
    const write =
      this.#durability === "commit"
        ? this.#committer.put(key, stored, point)
        : this.#settle(() => this.#committer.putFlushed(key, stored, point), true);
    return this.#announce("call", call, write);
  }

  /**
   * Prompts of open rollouts are stored as a reference to the longest stored prefix plus their new tokens; routed
   * experts (R3) only for the positions the rollout has none for yet.
   */
  #promptRef(call: CallRecord) {
    const rolloutId = call.rolloutId;
    if (rolloutId === null || !this.#currentIndex(rolloutId)) return null;
    const prompts = this.#prompts!;
    const prompt = call.promptTokenIds;
    if (prompt !== null) {
      // Choices share the prompt: its rows are kept with the first choice that has them.
      let promptKept = false;
      for (const choice of call.choices) {
        const routing = choice.routing;
        if (!routing || routing.rows === 0) continue;
        let known = prompts.routedPrefix(rolloutId, [...prompt, ...choice.tokenIds]);
        if (promptKept) known = Math.max(known, prompt.length);
        if (known > routing.start) choice.routing = sliceRouting(routing, known);
        if (routing.start <= known && routing.start + routing.rows >= prompt.length) promptKept = true;
      }
    }
    return prompts.admit(rolloutId, call);
  }

  /**
   * How many leading positions of `ids` already have routed experts in an open rollout's calls (0 when none, or the
   * rollout is not open): what an upstream need not send again (SGLang's routed_experts_start_len).
   */
  routedPrefix(rolloutId: string, ids: ArrayLike<number>): number {
    if (!this.#currentIndex(rolloutId)) return 0;
    return this.#prompts!.routedPrefix(rolloutId, ids);
  }

  /** Makes the prompt index hold every stored call of an open rollout; false when there is none to keep current. */
  #currentIndex(rolloutId: string): boolean {
    if (!this.#prompts) return false;
    if (this.getRollout(rolloutId)?.status !== "open") return false;
    const seen = this.#prompts.seen(rolloutId);
    if (!seen) {
      const mark = this.callLogMark(rolloutId); // before the listing: what is committed after it is caught up later
      this.#prompts.rebuild(rolloutId, this.listCallTokens(rolloutId), mark);
    } else if (this.#shared) {
      // Other workers add calls too: the index takes theirs first, so prompts refer to the longest stored prefix.
      const unseen = this.unseenCalls(rolloutId, seen);
      if (unseen.length > 0) {
        const decoder = this.#catchUpDecoder(rolloutId);
        const calls = unseen.flatMap((seq) => {
          const stored = this.#calls.get([rolloutId, seq]);
          return stored ? [decoder.decode(stored)] : [];
        });
        this.#prompts.extend(rolloutId, calls);
      }
    }
    return true;
  }

  /** Reads another stored call of the same rollout (what the decoders follow prompt references with). */
  #callLookup(rolloutKey: string): (seq: number) => StoredCall | undefined {
    return (seq) => this.#calls.get([rolloutKey, seq]);
  }

  #decoder(rolloutKey: string): CallDecoder {
    return new CallDecoder(this.#callLookup(rolloutKey));
  }

  listCalls(rolloutId: string | null): CallRecord[] {
    const key = rolloutId ?? UNATTRIBUTED;
    const decoder = this.#decoder(key);
    const out: CallRecord[] = [];
    for (const { value } of this.#calls.getRange(callRange(key))) {
      out.push(decoder.decode(value));
    }
    return out;
  }

  /**
   * Makes the next reads see every transaction committed so far, by any thread. lmdb-js keeps a thread's read snapshot
   * until a 0 ms timer resets it; a thread that only reads (the trajectory worker) and gets a request right after
   * answering another would otherwise read the state of the previous request, without calls committed since.
   */
  refreshReads(): void {
    this.#root.resetReadTxn();
  }

  /**
   * What trajectory reconstruction needs of a rollout's calls, in call order: their tokens, with prompts sharing memory
   * the way they share prefixes (see call-tokens-decoder.ts). Much cheaper than `listCalls` for long rollouts.
   */
  listCallTokens(rolloutId: string): CallTokens[] {
    const decoder = new CallTokensDecoder(this.#callLookup(rolloutId));
    const out: CallTokens[] = [];
    for (const { value } of this.#calls.getRange(callRange(rolloutId))) {
      out.push(decoder.decode(value));
    }
    return out;
  }

  getCall(rolloutId: string | null, seq: number): CallRecord | undefined {
    const key = rolloutId ?? UNATTRIBUTED;
    const stored = this.#calls.get([key, seq]);
    return stored ? this.#decoder(key).decode(stored) : undefined;
  }

  /** Bytes of packed token ids stored for a rollout's calls (prompt tails and sampled ids). */
  storedTokenBytes(rolloutId: string): { ids: number; logprobs: number; routing: number; routedTokens: number } {
    let ids = 0;
    let logprobs = 0;
    let routing = 0;
    let routedTokens = 0;
    for (const { value } of this.#calls.getRange(callRange(rolloutId))) {
      ids += value.promptTail?.byteLength ?? 0;
      for (const choice of value.choices) {
        ids += choice.tokenIds.byteLength;
        logprobs += choice.logprobs?.byteLength ?? 0;
        routing += choice.routing?.data.byteLength ?? 0;
        routedTokens += choice.routing?.rows ?? 0;
      }
    }
    return { ids, logprobs, routing, routedTokens };
  }

  countCalls(rolloutId: string | null): number {
    const key = rolloutId ?? UNATTRIBUTED;
    return this.#calls.getKeysCount(callRange(key));
  }

  /**
   * The environment and its tables, for store/retention.ts (which removes whole rollouts) and store/store-stats.ts;
   * `forget` drops what this process keeps in memory of a removed rollout.
   */
  tables(): StoreTables {
    return {
      root: this.#root,
      rollouts: this.#rollouts,
      keys: this.#keys,
      rolloutsByTime: this.#rolloutsByTime,
      calls: this.#calls,
      callLog: this.#callLog,
      finished: this.#finished,
      finishedIds: this.#finishedIds,
      deadlines: this.#deadlines,
      cursors: this.#cursors,
      consumerState: this.#consumerState,
      branches: this.#branches,
      reports: this.#reportsTable,
      series: this.#series.seconds,
      seriesMinutes: this.#series.minutes,
      forget: (id) => {
        this.#rolloutCache.delete(id);
        this.#catchUpDecoders.delete(id);
        this.#prompts?.forget(id);
        this.#requestBases.forget(id);
      },
    };
  }

  /** Bytes of the file's pages no table holds (LMDB reuses them before it grows the file). */
  #reusableBytes(): number {
    // Asked only by a look at the disk, which a closed store no longer writes to.
    if ((this.#root as unknown as { status?: string } | undefined)?.status !== "open") return 0;
    const { root, forget: _forget, ...tables } = this.tables();
    const pages = pageUse(root, Object.values(tables));
    return pages.free * pages.pageSize;
  }

  /** Waits for every write issued so far to be committed. */
  async committed(): Promise<void> {
    this.#committer.commitNow();
    await this.#root.committed;
  }

  async close(): Promise<void> {
    this.#committer.commitNow();
    await this.#root.committed;
    // Calls that finished while the writes above settled are committed too; later ones are refused.
    this.#committer.close();
    this.#seriesRecorder.flush();
    await this.#root.close();
  }
}
