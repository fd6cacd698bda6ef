// Writes a consumer group's state changes to the store in batches: one transaction per batch, never one per lease
// or ack. Changes wait up to PERSIST_DELAY_MS for company; `durable()` writes at once (the stream awaits it before it
// sends a rollout, so a lease is on record before its rollout leaves). A failed write's changes go back into the
// next batch.
import type { ConsumerStateChanges, GroupAffinity, Store } from "../../store/store.ts";
import type { StateChanges } from "./lease-state.ts";

const PERSIST_DELAY_MS = 100;

interface Pending {
  committed?: number;
  leases: Map<number, string | null>;
  acked: Map<number, boolean>;
  affinity: Map<string, GroupAffinity | null>;
}

function empty(): Pending {
  return { leases: new Map(), acked: new Map(), affinity: new Map() };
}

export class ConsumerStatePersister implements StateChanges {
  readonly #name: string;
  readonly #store: Pick<Store, "writeConsumerState">;
  readonly #log: (line: string) => void;
  #persisted: number;
  #pending = empty();
  #timer: NodeJS.Timeout | null = null;
  /** The write in progress and the one queued behind it. */
  #writing: Promise<void> | null = null;
  #queued: Promise<void> | null = null;
  #closed = false;

  constructor(name: string, store: Pick<Store, "writeConsumerState">, persisted: number, log: (line: string) => void) {
    this.#name = name;
    this.#store = store;
    this.#persisted = persisted;
    this.#log = log;
  }

  /** The committed cursor as last written (what survives a restart). */
  get persisted(): number {
    return this.#persisted;
  }

  lease(cursor: number, member: string | null): void {
    this.#pending.leases.set(cursor, member);
  }

  ack(cursor: number): void {
    this.#pending.acked.set(cursor, true);
  }

  unack(cursor: number): void {
    // An ack not written yet needs no removal.
    if (this.#pending.acked.get(cursor) === true) this.#pending.acked.delete(cursor);
    else this.#pending.acked.set(cursor, false);
  }

  affinity(key: string, value: GroupAffinity | null): void {
    this.#pending.affinity.set(key, value);
  }

  committed(cursor: number): void {
    this.#pending.committed = cursor;
  }

  #isClean(): boolean {
    const p = this.#pending;
    return p.committed === undefined && p.leases.size === 0 && p.acked.size === 0 && p.affinity.size === 0;
  }

  /** Writes what changed within PERSIST_DELAY_MS. */
  schedule(): void {
    if (this.#timer || this.#closed || this.#isClean()) return;
    this.#timer = setTimeout(() => {
      this.#timer = null;
      this.#flush().catch((error) =>
        this.#log(
          `consumer group ${this.#name}: writing its state failed: ${error instanceof Error ? error.message : String(error)}`,
        ),
      );
    }, PERSIST_DELAY_MS);
    this.#timer.unref();
  }

  /** Resolves once every change made so far is written. */
  durable(): Promise<void> {
    if (!this.#isClean()) return this.#flush();
    return this.#writing ?? Promise.resolve();
  }

  /** Writes the changes in one transaction; while one is being written, the next batch waits behind it. */
  #flush(): Promise<void> {
    if (this.#queued) return this.#queued;
    if (this.#writing) {
      const queued: Promise<void> = this.#writing
        .catch(() => {})
        .then(() => {
          this.#queued = null;
          return this.#flush();
        });
      this.#queued = queued;
      return queued;
    }
    if (this.#timer) {
      clearTimeout(this.#timer);
      this.#timer = null;
    }
    if (this.#isClean()) return Promise.resolve();
    if (this.#closed)
      return Promise.reject(new Error(`consumer group ${this.#name} is closed: its state is no longer written`));
    const batch = this.#pending;
    this.#pending = empty();
    const changes: ConsumerStateChanges = batch;
    let write: Promise<void>;
    try {
      write = this.#store.writeConsumerState(this.#name, changes);
    } catch (error) {
      write = Promise.reject(error); // a closed store throws: reported like a failed write, never uncaught
    }
    const writing: Promise<void> = write.then(
      () => {
        if (batch.committed !== undefined) this.#persisted = Math.max(this.#persisted, batch.committed);
      },
      (error: unknown) => {
        this.#restore(batch);
        throw error;
      },
    );
    const settled: Promise<void> = writing.finally(() => {
      if (this.#writing === settled) this.#writing = null;
    });
    this.#writing = settled;
    return settled;
  }

  /** A failed write's changes go back into the next one, unless changed since. */
  #restore(batch: Pending): void {
    const p = this.#pending;
    if (batch.committed !== undefined && p.committed === undefined) p.committed = batch.committed;
    for (const [k, v] of batch.leases) if (!p.leases.has(k)) p.leases.set(k, v);
    for (const [k, v] of batch.acked) if (!p.acked.has(k)) p.acked.set(k, v);
    for (const [k, v] of batch.affinity) if (!p.affinity.has(k)) p.affinity.set(k, v);
    this.schedule(); // tried again, not left for the next change
  }

  /** Writes everything changed so far (acks since the last write would otherwise wait for the timer). */
  async persist(): Promise<void> {
    for (let i = 0; i < 3 && (this.#writing || this.#queued || !this.#isClean()); i++) await this.#flush();
  }

  /** Writes what is pending; later changes (sessions ending as the gateway closes) stay in memory. */
  async close(): Promise<void> {
    await this.persist();
    this.#closed = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
  }
}
