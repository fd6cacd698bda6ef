// One consumer group's leases, as a state machine over the finished log: which rollouts are leased to which member,
// which are acked, which member each RL group belongs to, and the committed cursor (every rollout at or below it
// acked). It reads the log and the clock it is given and records what changed for a persister to write; it starts no
// timer and writes nothing itself, so its tests run on a manual clock.
//
// Sessions scan the log from the committed cursor page by page (nothing is queued in memory: a slow member costs its
// leases, never buffered rollouts). A rollout goes to the first session that scans it unless its `group` belongs to
// another member (one RL group is processed by one member). Whenever a lease or a group is released, every session
// rescans from the committed cursor, so nothing skipped is left behind.
//
// Leases and groups belong to a member by its name (`Subscribe.member`), not to a session:
// - A named member's leases are persisted before their rollouts are sent, so every rollout a member may hold is on
//   record as that member's, and a gateway restart cannot hand it to another member. Acks, released leases and the
//   committed cursor may be written later: one lost in a crash is harmless, since the rollout's lease survives and
//   the rollout goes back only to its member, which acks it again.
// - While a named member has no session (its last one ended, or the gateway restarted), its leases and groups wait
//   for it for `memberTimeoutMs`. Back, it claims what it holds (`held`: not sent again) and is sent the rest of
//   its leases again. Past the timeout they go to other members, logged: at least once, since the absent member may
//   have trained some of them.
// - A group stays with its member after all of its rollouts are acked until the committed cursor is
//   `groupRetentionMs` of finished-log time past the group's last rollout (cursors are microsecond stamps), so a
//   late rollout goes to the member that knows the group is done rather than starting a partial group elsewhere.
// An unnamed member (its peer address stands in for a name) cannot be recognised when it comes back: its leases and
// groups last as long as its session and are not persisted. A claim that comes too late (the rollout or its group
// went to another member meanwhile) is rejected, and the member drops the rollout.
import type { RolloutRecord } from "../../store/records.ts";
import type { ConsumerState, GroupAffinity, Store } from "../../store/store.ts";
import { systemClock, type Clock } from "../../util/clock.ts";

const PAGE = 256;
/** Leased plus acked-above-committed entries one group keeps track of; past it, delivery waits. */
export const MAX_OUTSTANDING = 100_000;
/** Groups kept for their members beyond those with leases; past it, the oldest fully acked ones are forgotten. */
export const MAX_RETAINED_GROUPS = 100_000;
/** How long a named member's leases and groups wait for it while it has no session. */
export const MEMBER_TIMEOUT_MS = 60_000;
/** How long (in finished-log time) a fully acked group stays with its member, for late rollouts. */
export const GROUP_RETENTION_MS = 10 * 60_000;
/** Least clock time between two sweeps for expired groups, once there are more than PRUNE_SWEEP_SIZE groups. */
const PRUNE_INTERVAL_MS = 1_000;
const PRUNE_SWEEP_SIZE = 1_000;

export interface Session {
  readonly id: string;
  /** The member's name, or its peer address when it gave none. */
  readonly member: string;
  /** Whether `member` is a name the member gave (its leases are persisted and wait for it when it is away). */
  readonly named: boolean;
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

/** What a joining member brings from before: rollouts it holds unacked, acks that may have been lost. */
export interface Rejoin {
  held?: readonly number[];
  acked?: readonly number[];
}

/** The finished log and the rollouts it names, as the lease state reads them. */
export type FinishedLog = Pick<Store, "finishedAfter" | "getRollout">;

/** Where the lease state records what a persister must write (null / unack removes an entry). */
export interface StateChanges {
  lease(cursor: number, member: string | null): void;
  ack(cursor: number): void;
  unack(cursor: number): void;
  affinity(key: string, value: GroupAffinity | null): void;
  committed(cursor: number): void;
}

export interface LeaseStateOptions {
  /** How long a named member's leases and groups wait for it while it has no session; default MEMBER_TIMEOUT_MS. */
  memberTimeoutMs?: number;
  /** How long a fully acked group stays with its member, in finished-log time; default GROUP_RETENTION_MS. */
  groupRetentionMs?: number;
  /** Leased plus acked-above-committed entries kept track of; default MAX_OUTSTANDING. */
  maxOutstanding?: number;
  /** Fully acked groups kept beyond `maxOutstanding`; default MAX_RETAINED_GROUPS. */
  maxRetainedGroups?: number;
  /** Time source of member timeouts and prune sweeps; default the system clock. */
  clock?: Clock;
  log?: (line: string) => void;
}

interface LeaseEntry {
  member: string;
  /** The session it was sent on; null while it waits for its member. */
  session: Session | null;
  key: string;
  /** Persisted (its member is named). */
  durable: boolean;
}

interface Affinity {
  member: string;
  /** Leases of the key (0: all acked, kept for late rollouts). */
  count: number;
  /** Highest cursor of the key leased so far. */
  last: number;
  durable: boolean;
}

interface MemberState {
  named: boolean;
  sessions: Set<Session>;
  /** Since when it has had no session (named members only); null while it has one. */
  absentSince: number | null;
}

export function affinityKey(rollout: RolloutRecord): string {
  return rollout.group !== null && rollout.group !== "" ? `group:${rollout.group}` : `rollout:${rollout.id}`;
}

/** Keys of RL groups (kept after they are acked); a rollout without a group is forgotten once acked. */
function isGroupKey(key: string): boolean {
  return key.startsWith("group:");
}

export class LeaseState {
  readonly name: string;
  readonly sessions = new Set<Session>();
  readonly #finished: FinishedLog;
  readonly #changes: StateChanges;
  readonly #now: Clock;
  readonly #log: (line: string) => void;
  readonly #memberTimeoutMs: number;
  readonly #maxOutstanding: number;
  readonly #maxGroups: number;
  /** Group retention in cursor units (microseconds). */
  readonly #retention: number;
  #committed: number;
  readonly #acked = new Set<number>();
  readonly #leases = new Map<number, LeaseEntry>();
  readonly #affinity = new Map<string, Affinity>();
  readonly #members = new Map<string, MemberState>();
  /** Keys some session skipped because another member held them: when released, everyone rescans. */
  readonly #contested = new Set<string>();
  #epoch = 0;
  /** Earliest time an absent member's wait ends; earliest committed cursor at which a kept group expires. */
  #nextExpiry = Infinity;
  #nextPrune = Infinity;
  #lastPrune = 0;

  /** Starts from the state persisted before a restart: every member in it is absent from now until it joins. */
  constructor(
    name: string,
    finished: FinishedLog,
    changes: StateChanges,
    persisted: { committed: number; state: ConsumerState },
    options: LeaseStateOptions = {},
  ) {
    this.name = name;
    this.#finished = finished;
    this.#changes = changes;
    this.#now = options.clock ?? systemClock;
    this.#log = options.log ?? (() => {});
    this.#memberTimeoutMs = options.memberTimeoutMs ?? MEMBER_TIMEOUT_MS;
    this.#retention = (options.groupRetentionMs ?? GROUP_RETENTION_MS) * 1000;
    this.#maxOutstanding = options.maxOutstanding ?? MAX_OUTSTANDING;
    this.#maxGroups = this.#maxOutstanding + (options.maxRetainedGroups ?? MAX_RETAINED_GROUPS);
    this.#committed = persisted.committed;
    this.#load(persisted.state);
  }

  #load(state: ConsumerState): void {
    const now = this.#now();
    for (const cursor of state.acked) {
      if (cursor > this.#committed) this.#acked.add(cursor);
      else this.#changes.unack(cursor);
    }
    for (const [key, { member, last }] of state.affinity) {
      this.#affinity.set(key, { member, count: 0, last, durable: true });
      this.#absent(member, now);
    }
    for (const [cursor, member] of state.leases) {
      const rollout = cursor > this.#committed && !this.#acked.has(cursor) ? this.#rolloutAt(cursor) : undefined;
      if (!rollout) {
        this.#changes.lease(cursor, null);
        continue;
      }
      const key = affinityKey(rollout);
      this.#leases.set(cursor, { member, session: null, key, durable: true });
      this.#absent(member, now);
      const affinity = this.#affinity.get(key);
      if (!affinity) this.#affinity.set(key, { member, count: 1, last: cursor, durable: true });
      else if (affinity.member === member) {
        affinity.count++;
        affinity.last = Math.max(affinity.last, cursor);
      }
    }
    for (const affinity of this.#affinity.values()) {
      if (affinity.count === 0) this.#nextPrune = Math.min(this.#nextPrune, affinity.last + this.#retention);
    }
    this.#prune();
  }

  #absent(member: string, since: number): void {
    if (this.#members.has(member)) return;
    this.#members.set(member, { named: true, sessions: new Set(), absentSince: since });
    this.#nextExpiry = Math.min(this.#nextExpiry, since + this.#memberTimeoutMs);
  }

  /** The finished log's entry at `cursor`, if there is one. */
  #logEntry(cursor: number): { cursor: number; rolloutId: string } | undefined {
    const entry = this.#finished.finishedAfter(cursor - 1, 1)[0];
    return entry?.cursor === cursor ? entry : undefined;
  }

  #rolloutAt(cursor: number): RolloutRecord | undefined {
    const entry = this.#logEntry(cursor);
    return entry ? this.#finished.getRollout(entry.rolloutId) : undefined;
  }

  get committed(): number {
    return this.#committed;
  }

  get leased(): number {
    return this.#leases.size;
  }

  /** Adds a session with what its member brings from before; returns the held cursors it must drop. */
  join(session: Session, rejoin: Rejoin = {}): number[] {
    this.#expireAbsent(this.#now());
    session.scanPos = this.#committed;
    session.epoch = this.#epoch;
    this.sessions.add(session);
    let member = this.#members.get(session.member);
    if (!member) {
      member = { named: session.named, sessions: new Set(), absentSince: null };
      this.#members.set(session.member, member);
    }
    member.sessions.add(session);
    member.absentSince = null;
    if (rejoin.acked?.length) this.ack(rejoin.acked);
    const rejected: number[] = [];
    for (const cursor of rejoin.held ?? []) if (!this.#claim(session, cursor)) rejected.push(cursor);
    return rejected;
  }

  /** A rollout the member already has stays or becomes its lease, unless it is acked or another member's. */
  #claim(session: Session, cursor: number): boolean {
    if (!Number.isSafeInteger(cursor) || cursor <= this.#committed || this.#acked.has(cursor)) return false;
    const lease = this.#leases.get(cursor);
    if (lease) {
      if (lease.member !== session.member) return false;
      if (lease.session !== session) {
        // Waiting for this member, or on an older session of it that has not ended yet.
        if (lease.session) lease.session.inFlight--;
        lease.session = session;
        session.inFlight++;
      }
      return true;
    }
    const rollout = this.#rolloutAt(cursor);
    if (!rollout) return false;
    const key = affinityKey(rollout);
    const affinity = this.#affinity.get(key);
    if (affinity && affinity.member !== session.member) return false;
    this.#lease(session, cursor, key);
    return true;
  }

  #lease(session: Session, cursor: number, key: string): void {
    const durable = session.named;
    this.#leases.set(cursor, { member: session.member, session, key, durable });
    session.inFlight++;
    let affinity = this.#affinity.get(key);
    if (!affinity) {
      affinity = { member: session.member, count: 0, last: 0, durable };
      this.#affinity.set(key, affinity);
    }
    if (affinity.count++ === 0) this.#bound();
    const later = cursor > affinity.last;
    if (later) affinity.last = cursor;
    if (!durable) return;
    this.#changes.lease(cursor, session.member);
    if (later && isGroupKey(key)) this.#changes.affinity(key, { member: affinity.member, last: cursor });
  }

  /**
   * Leases the next deliverable rollout to `session`, or returns null when there is none now. The lease is among
   * the recorded changes: the caller sends the rollout once they are written.
   */
  next(session: Session): Lease | null {
    this.#expireAbsent(this.#now());
    if (session.inFlight >= session.maxInFlight) return null;
    // Past the bound no new lease is made, except of the rollout the committed cursor waits for (acking it frees
    // room); waiting leases are still sent again (they add nothing).
    const full = this.#leases.size + this.#acked.size >= this.#maxOutstanding;
    const front = full ? this.#front() : null;
    if (session.epoch !== this.#epoch || session.scanPos < this.#committed) {
      session.epoch = this.#epoch;
      session.scanPos = this.#committed;
    }
    for (;;) {
      const page = this.#finished.finishedAfter(session.scanPos, PAGE);
      if (page.length === 0) return null;
      for (const { cursor, rolloutId } of page) {
        const before = session.scanPos;
        session.scanPos = cursor;
        if (this.#acked.has(cursor)) continue;
        const lease = this.#leases.get(cursor);
        if (lease && (lease.session !== null || lease.member !== session.member)) continue;
        const rollout = this.#finished.getRollout(rolloutId);
        if (!rollout) {
          this.#ackOne(cursor); // gone from the store: nothing to deliver
          continue;
        }
        if (lease) {
          // Sent to this member before (on a session that ended) and not claimed back: again, on this session.
          lease.session = session;
          session.inFlight++;
          return { cursor, rollout };
        }
        const key = affinityKey(rollout);
        const affinity = this.#affinity.get(key);
        if (affinity && affinity.member !== session.member) {
          this.#contested.add(key);
          continue;
        }
        if (full && cursor !== front) {
          session.scanPos = before; // scanned again once there is room
          return null;
        }
        this.#lease(session, cursor, key);
        return { cursor, rollout };
      }
    }
  }

  /** The first rollout above the committed cursor that is not acked: the one the committed cursor waits for. */
  #front(): number | null {
    let after = this.#committed;
    for (;;) {
      const page = this.#finished.finishedAfter(after, PAGE);
      if (page.length === 0) return null;
      for (const { cursor } of page) {
        if (!this.#acked.has(cursor)) return cursor;
        after = cursor;
      }
    }
  }

  ack(cursors: Iterable<number>): void {
    for (const cursor of cursors) this.#ackOne(cursor);
    this.#advance();
  }

  /**
   * A session ended. A named member's leases wait for it (for another of its sessions, or its return) until it
   * has been absent for memberTimeoutMs; an unnamed member's go back to the group at once.
   */
  leave(session: Session): void {
    if (!this.sessions.delete(session)) return;
    const member = this.#members.get(session.member);
    member?.sessions.delete(session);
    for (const [cursor, lease] of this.#leases) {
      if (lease.session !== session) continue;
      if (session.named) {
        lease.session = null;
        session.inFlight--;
      } else {
        this.#drop(cursor, lease);
      }
    }
    if (member && member.sessions.size === 0) {
      if (member.named) {
        member.absentSince = this.#now();
        this.#nextExpiry = Math.min(this.#nextExpiry, member.absentSince + this.#memberTimeoutMs);
      } else {
        this.#members.delete(session.member);
        for (const [key, affinity] of this.#affinity)
          if (affinity.member === session.member) this.#forget(key, affinity);
      }
    }
    this.#rescan();
  }

  /** Members absent past the timeout: their leases and groups go back to the group (at least once). */
  #expireAbsent(now: number): void {
    if (now < this.#nextExpiry) return;
    let next = Infinity;
    let released = false;
    for (const [name, member] of this.#members) {
      if (member.absentSince === null) continue;
      const due = member.absentSince + this.#memberTimeoutMs;
      if (due > now) {
        next = Math.min(next, due);
        continue;
      }
      this.#members.delete(name);
      let rollouts = 0;
      let groups = 0;
      for (const [key, affinity] of this.#affinity) if (affinity.member === name && isGroupKey(key)) groups++;
      for (const [cursor, lease] of this.#leases) {
        if (lease.member !== name) continue;
        this.#drop(cursor, lease);
        rollouts++;
      }
      for (const [key, affinity] of this.#affinity) if (affinity.member === name) this.#forget(key, affinity);
      if (rollouts > 0 || groups > 0) {
        const absent = Math.round((now - member.absentSince) / 1000);
        this.#log(
          `consumer group ${this.name}: member ${name} absent for ${absent} s: its ${rollouts} rollouts go to other members` +
            (rollouts > 0 ? " (at least once: it may have trained some of them)" : "") +
            (groups > 0 ? `, its ${groups} groups are released` : ""),
        );
      }
      released = true;
    }
    this.#nextExpiry = next;
    if (released) this.#rescan();
  }

  #ackOne(cursor: number): void {
    if (!Number.isSafeInteger(cursor) || cursor <= this.#committed || this.#acked.has(cursor)) return;
    const lease = this.#leases.get(cursor);
    if (lease) this.#drop(cursor, lease);
    else if (!this.#logEntry(cursor)) return; // not in the log
    this.#acked.add(cursor);
    this.#changes.ack(cursor);
  }

  /** A lease ends (acked, or released). Its group stays with the member while the member is known. */
  #drop(cursor: number, lease: LeaseEntry): void {
    this.#leases.delete(cursor);
    if (lease.durable) this.#changes.lease(cursor, null);
    if (lease.session) {
      lease.session.inFlight--;
      lease.session.wake();
    }
    const affinity = this.#affinity.get(lease.key);
    if (!affinity || affinity.member !== lease.member || --affinity.count > 0) return;
    if (isGroupKey(lease.key) && this.#members.has(lease.member)) {
      this.#nextPrune = Math.min(this.#nextPrune, affinity.last + this.#retention);
    } else {
      this.#forget(lease.key, affinity);
    }
  }

  #forget(key: string, affinity: Affinity): void {
    this.#affinity.delete(key);
    if (affinity.durable && isGroupKey(key)) this.#changes.affinity(key, null);
    if (this.#contested.delete(key)) this.#rescan();
  }

  /** Too many groups kept: the oldest fully acked ones are forgotten (a late rollout of one goes to anyone). */
  #bound(): void {
    if (this.#affinity.size <= this.#maxGroups) return;
    for (const [key, affinity] of this.#affinity) {
      if (affinity.count > 0) continue;
      this.#forget(key, affinity);
      if (this.#affinity.size <= this.#maxGroups) return;
    }
  }

  /** Forgets fully acked groups the committed cursor has left `groupRetentionMs` behind. */
  #prune(): void {
    if (this.#committed < this.#nextPrune) return;
    const now = this.#now();
    if (this.#affinity.size > PRUNE_SWEEP_SIZE && now - this.#lastPrune < PRUNE_INTERVAL_MS) return;
    this.#lastPrune = now;
    let next = Infinity;
    for (const [key, affinity] of this.#affinity) {
      if (affinity.count > 0) continue;
      const until = affinity.last + this.#retention;
      if (until <= this.#committed) this.#forget(key, affinity);
      else next = Math.min(next, until);
    }
    this.#nextPrune = next;
  }

  #rescan(): void {
    this.#epoch++;
    for (const s of this.sessions) s.wake();
  }

  /** Moves the committed cursor over the acked prefix of the log. */
  #advance(): void {
    const before = this.#committed;
    for (;;) {
      const page = this.#finished.finishedAfter(this.#committed, PAGE);
      let stopped = page.length === 0;
      for (const { cursor } of page) {
        if (!this.#acked.delete(cursor)) {
          stopped = true;
          break;
        }
        this.#committed = cursor;
        this.#changes.unack(cursor);
      }
      if (stopped) break;
    }
    if (this.#committed === before) return;
    this.#changes.committed(this.#committed);
    this.#prune();
  }

  status() {
    const now = this.#now();
    const absent = [...this.#members]
      .filter(([, m]) => m.absentSince !== null)
      .map(([member, m]) => ({
        member,
        absentMs: now - m.absentSince!,
        leases: [...this.#leases.values()].filter((l) => l.member === member).length,
      }));
    return {
      name: this.name,
      committed: this.#committed,
      leased: this.#leases.size,
      ackedAhead: this.#acked.size,
      groups: this.#affinity.size,
      members: [...this.sessions].map((s) => ({ id: s.id, member: s.member, inFlight: s.inFlight })),
      absent,
    };
  }
}
