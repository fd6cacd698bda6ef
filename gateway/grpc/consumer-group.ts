// One consumer group's view of the finished log: which rollouts are leased to which member session, which
// are acked, and the committed cursor (every rollout at or below it acked), persisted in the store.
//
// Sessions scan the log from the committed cursor page by page (nothing is queued in memory: a slow member
// costs its leases, never buffered rollouts). A rollout goes to the first session that scans it unless its
// `group` is held by another session (one RL group is processed by one member). Whenever a lease is released
// or a contested group's last lease is acked, every session rescans from the committed cursor, so nothing
// skipped is ever left behind.
import type { RolloutRecord } from "../../store/records.ts";
import type { Store } from "../../store/store.ts";

const PAGE = 256;
/** Leased plus acked-above-committed entries one group keeps track of; past it, delivery waits. */
export const MAX_OUTSTANDING = 100_000;
const PERSIST_DELAY_MS = 100;

export interface Session {
  readonly id: string;
  readonly member: string;
  readonly maxInFlight: number;
  inFlight: number;
  /** Last cursor this session scanned past. */
  scanPos: number;
  /** The group's epoch this session's scan belongs to (a new epoch restarts it from the committed cursor). */
  epoch: number;
  /** Wakes the session's delivery loop (a lease freed, an ack, a rescan). */
  wake(): void;
}

export interface Lease {
  cursor: number;
  rollout: RolloutRecord;
}

interface Held {
  session: Session;
  key: string;
  count: number;
}

export function affinityKey(rollout: RolloutRecord): string {
  return rollout.group !== null && rollout.group !== "" ? `group:${rollout.group}` : `rollout:${rollout.id}`;
}

export class ConsumerGroup {
  readonly name: string;
  readonly #store: Store;
  #committed: number;
  #persisted: number;
  #persistTimer: NodeJS.Timeout | null = null;
  readonly #acked = new Set<number>();
  readonly #leases = new Map<number, { session: Session; key: string }>();
  readonly #held = new Map<string, Held>();
  /** Keys some session skipped because another held them: when released, everyone rescans. */
  readonly #contested = new Set<string>();
  readonly sessions = new Set<Session>();
  #epoch = 0;

  constructor(name: string, store: Store) {
    this.name = name;
    this.#store = store;
    this.#committed = store.getCursor(name);
    this.#persisted = this.#committed;
  }

  get committed(): number {
    return this.#committed;
  }

  get leased(): number {
    return this.#leases.size;
  }

  join(session: Session): void {
    session.scanPos = this.#committed;
    session.epoch = this.#epoch;
    this.sessions.add(session);
  }

  /** Leases the next deliverable rollout to `session`, or returns null when there is none now. */
  next(session: Session): Lease | null {
    if (session.inFlight >= session.maxInFlight) return null;
    if (this.#leases.size + this.#acked.size >= MAX_OUTSTANDING) return null;
    if (session.epoch !== this.#epoch || session.scanPos < this.#committed) {
      session.epoch = this.#epoch;
      session.scanPos = this.#committed;
    }
    for (;;) {
      const page = this.#store.finishedAfter(session.scanPos, PAGE);
      if (page.length === 0) return null;
      for (const { cursor, rolloutId } of page) {
        session.scanPos = cursor;
        if (this.#acked.has(cursor) || this.#leases.has(cursor)) continue;
        const rollout = this.#store.getRollout(rolloutId);
        if (!rollout) {
          this.#ackOne(cursor); // gone from the store: nothing to deliver
          continue;
        }
        const key = affinityKey(rollout);
        const held = this.#held.get(key);
        if (held && held.session !== session) {
          this.#contested.add(key);
          continue;
        }
        this.#leases.set(cursor, { session, key });
        if (held) held.count++;
        else this.#held.set(key, { session, key, count: 1 });
        session.inFlight++;
        return { cursor, rollout };
      }
    }
  }

  ack(cursors: Iterable<number>): void {
    for (const cursor of cursors) this.#ackOne(cursor);
    this.#advance();
  }

  /** A lease given back without an ack (e.g. its message could not be sent). */
  unlease(cursor: number): void {
    const lease = this.#leases.get(cursor);
    if (!lease) return;
    this.#drop(cursor, lease);
    this.#rescan();
  }

  /** A session ended: its leases go back to the group and every other session rescans. */
  leave(session: Session): void {
    if (!this.sessions.delete(session)) return;
    for (const [cursor, lease] of this.#leases) if (lease.session === session) this.#drop(cursor, lease);
    this.#rescan();
  }

  #ackOne(cursor: number): void {
    if (!Number.isSafeInteger(cursor) || cursor <= this.#committed) return;
    const lease = this.#leases.get(cursor);
    if (lease) this.#drop(cursor, lease);
    else if (this.#store.finishedAfter(cursor - 1, 1)[0]?.cursor !== cursor) return; // not in the log
    this.#acked.add(cursor);
  }

  #drop(cursor: number, lease: { session: Session; key: string }): void {
    this.#leases.delete(cursor);
    lease.session.inFlight--;
    lease.session.wake();
    const held = this.#held.get(lease.key);
    if (held && --held.count <= 0) {
      this.#held.delete(lease.key);
      if (this.#contested.delete(lease.key)) this.#rescan();
    }
  }

  #rescan(): void {
    this.#epoch++;
    for (const s of this.sessions) s.wake();
  }

  /** Moves the committed cursor over the acked prefix of the log. */
  #advance(): void {
    const before = this.#committed;
    for (;;) {
      const page = this.#store.finishedAfter(this.#committed, PAGE);
      let stopped = page.length === 0;
      for (const { cursor } of page) {
        if (!this.#acked.delete(cursor)) {
          stopped = true;
          break;
        }
        this.#committed = cursor;
      }
      if (stopped) break;
    }
    if (this.#committed !== before) this.#schedulePersist();
  }

  #schedulePersist(): void {
    if (this.#persistTimer) return;
    this.#persistTimer = setTimeout(() => {
      this.#persistTimer = null;
      void this.persist();
    }, PERSIST_DELAY_MS);
    this.#persistTimer.unref();
  }

  /** Writes the committed cursor (acks since the last write are re-delivered after a crash: at least once). */
  async persist(): Promise<void> {
    if (this.#persistTimer) {
      clearTimeout(this.#persistTimer);
      this.#persistTimer = null;
    }
    const cursor = this.#committed;
    if (cursor === this.#persisted) return;
    await this.#store.putCursor(this.name, cursor);
    this.#persisted = Math.max(this.#persisted, cursor);
  }

  status() {
    return {
      name: this.name,
      committed: this.#committed,
      leased: this.#leases.size,
      ackedAhead: this.#acked.size,
      members: [...this.sessions].map((s) => ({ id: s.id, member: s.member, inFlight: s.inFlight })),
    };
  }
}
