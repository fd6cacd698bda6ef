// One consumer group's view of the finished log: which rollouts are leased to which member session, which
// are acked, and the committed cursor (every rollout at or below it acked), persisted in the store.
//
// Sessions scan the log from the committed cursor page by page (nothing is queued in memory: a slow member
// costs its leases, never buffered rollouts). A rollout goes to the first session that scans it unless its
// `group` is held by another session (one RL group is processed by one member). Whenever a lease is released
// or a contested group's last lease is acked, every session rescans from the committed cursor, so nothing
// skipped is ever left behind.
//
// Leases live in memory; what survives a gateway restart is the members' own record of what they hold. A
// member joining says which rollouts it holds unacked (claims: they become its leases again, and their groups
// its groups) and re-sends acks the gateway may have lost. Until the members are back, the rollouts that were
// unacked when this group was created (the backlog above the committed cursor) may be held by one of them, so
// for a rejoin grace they and their groups are given to nobody who does not hold the group: the grace ends
// once every backlog rollout is claimed or acked, or after REJOIN_GRACE_MS. A claim that comes too late (the
// rollout or its group went to another member meanwhile) is rejected, and the member drops the rollout.
import type { RolloutRecord } from "../../store/records.ts";
import type { Store } from "../../store/store.ts";

const PAGE = 256;
/** Leased plus acked-above-committed entries one group keeps track of; past it, delivery waits. */
export const MAX_OUTSTANDING = 100_000;
const PERSIST_DELAY_MS = 100;
/** How long after a group is created (the first member joins) backlog rollouts wait for their holder. */
export const REJOIN_GRACE_MS = 5_000;

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

/** What a joining member brings from before: rollouts it holds unacked, acks that may have been lost. */
export interface Rejoin {
  held?: readonly number[];
  acked?: readonly number[];
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
  /** Rejoin grace: backlog cursor → its affinity key, until claimed or acked; and those keys' counts. */
  readonly #unclaimed = new Map<number, string>();
  readonly #unclaimedKeys = new Map<string, number>();
  #graceUntil: number;
  #graceActive: boolean;

  constructor(name: string, store: Store, options: { rejoinGraceMs?: number } = {}) {
    this.name = name;
    this.#store = store;
    this.#committed = store.getCursor(name);
    this.#persisted = this.#committed;
    this.#graceUntil = Date.now() + (options.rejoinGraceMs ?? REJOIN_GRACE_MS);
    if (this.#graceUntil > Date.now()) this.#scanBacklog();
    this.#graceActive = this.#unclaimed.size > 0;
  }

  /** The backlog a member may hold. Past MAX_OUTSTANDING entries nothing is held back (no member holds that much). */
  #scanBacklog(): void {
    let after = this.#committed;
    while (this.#unclaimed.size < MAX_OUTSTANDING) {
      const page = this.#store.finishedAfter(after, PAGE);
      if (page.length === 0) return;
      for (const { cursor, rolloutId } of page) {
        after = cursor;
        const rollout = this.#store.getRollout(rolloutId);
        if (!rollout) continue;
        const key = affinityKey(rollout);
        this.#unclaimed.set(cursor, key);
        this.#unclaimedKeys.set(key, (this.#unclaimedKeys.get(key) ?? 0) + 1);
      }
    }
  }

  /** A backlog rollout was claimed or acked: it no longer waits, nor does its group once all of it is. */
  #settle(cursor: number): void {
    const key = this.#unclaimed.get(cursor);
    if (key === undefined) return;
    this.#unclaimed.delete(cursor);
    const left = (this.#unclaimedKeys.get(key) ?? 1) - 1;
    if (left > 0) this.#unclaimedKeys.set(key, left);
    else this.#unclaimedKeys.delete(key);
  }

  #inGrace(): boolean {
    if (!this.#graceActive) return false;
    if (this.#unclaimed.size > 0 && Date.now() < this.#graceUntil) return true;
    this.#graceActive = false;
    this.#unclaimed.clear();
    this.#unclaimedKeys.clear();
    this.#rescan(); // what the grace held back is deliverable now
    return false;
  }

  get committed(): number {
    return this.#committed;
  }

  get leased(): number {
    return this.#leases.size;
  }

  /** The committed cursor as last written to the store (what survives a restart). */
  get persisted(): number {
    return this.#persisted;
  }

  /** Adds a session with what its member brings from before; returns the held cursors it must drop. */
  join(session: Session, rejoin: Rejoin = {}): number[] {
    session.scanPos = this.#committed;
    session.epoch = this.#epoch;
    this.sessions.add(session);
    if (rejoin.acked?.length) this.ack(rejoin.acked);
    const rejected: number[] = [];
    for (const cursor of rejoin.held ?? []) if (!this.#claim(session, cursor)) rejected.push(cursor);
    return rejected;
  }

  /** A rollout the member already has becomes its lease again, unless it is acked or went to another member. */
  #claim(session: Session, cursor: number): boolean {
    if (!Number.isSafeInteger(cursor) || cursor <= this.#committed || this.#acked.has(cursor) || this.#leases.has(cursor)) return false;
    const entry = this.#store.finishedAfter(cursor - 1, 1)[0];
    const rollout = entry?.cursor === cursor ? this.#store.getRollout(entry.rolloutId) : undefined;
    if (!rollout) return false;
    const key = affinityKey(rollout);
    const held = this.#held.get(key);
    if (held && held.session !== session) return false;
    this.#lease(session, cursor, key);
    this.#settle(cursor);
    return true;
  }

  #lease(session: Session, cursor: number, key: string): void {
    this.#leases.set(cursor, { session, key });
    const held = this.#held.get(key);
    if (held) held.count++;
    else this.#held.set(key, { session, key, count: 1 });
    session.inFlight++;
  }

  /** Leases the next deliverable rollout to `session`, or returns null when there is none now. */
  next(session: Session): Lease | null {
    if (session.inFlight >= session.maxInFlight) return null;
    if (this.#leases.size + this.#acked.size >= MAX_OUTSTANDING) return null;
    const grace = this.#inGrace();
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
        // Its holder may not be back yet (the grace's end rescans).
        if (!held && grace && (this.#unclaimed.has(cursor) || this.#unclaimedKeys.has(key))) continue;
        this.#lease(session, cursor, key);
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
    this.#settle(cursor);
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
      awaitingRejoin: this.#unclaimed.size,
      members: [...this.sessions].map((s) => ({ id: s.id, member: s.member, inFlight: s.inFlight })),
    };
  }
}
