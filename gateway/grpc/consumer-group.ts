// A consumer group of the trajectory stream: its lease state (lease-state.ts: who holds which rollout, acks, RL-group
// affinity, the committed cursor) joined to the persister that writes its changes to the store in batches
// (consumer-state-persister.ts). Every operation that changes the state schedules a write; the stream awaits
// `durable()` before it sends a leased rollout.
import type { Store } from "../../store/store.ts";
import { ConsumerStatePersister } from "./consumer-state-persister.ts";
import { LeaseState, type Lease, type LeaseStateOptions, type Rejoin, type Session } from "./lease-state.ts";

export { affinityKey, GROUP_RETENTION_MS, MAX_OUTSTANDING, MEMBER_TIMEOUT_MS } from "./lease-state.ts";
export type { Lease, Rejoin, Session } from "./lease-state.ts";
export type ConsumerGroupOptions = LeaseStateOptions;

export class ConsumerGroup {
  readonly name: string;
  readonly #state: LeaseState;
  readonly #persister: ConsumerStatePersister;

  constructor(name: string, store: Store, options: ConsumerGroupOptions = {}) {
    this.name = name;
    const committed = store.getCursor(name);
    this.#persister = new ConsumerStatePersister(name, store, committed, options.log ?? (() => {}));
    this.#state = new LeaseState(
      name,
      store,
      this.#persister,
      { committed, state: store.getConsumerState(name) },
      options,
    );
    this.#persister.schedule(); // what loading found stale
  }

  get sessions(): ReadonlySet<Session> {
    return this.#state.sessions;
  }

  get committed(): number {
    return this.#state.committed;
  }

  get leased(): number {
    return this.#state.leased;
  }

  /** The committed cursor as last written to the store (what survives a restart). */
  get persisted(): number {
    return this.#persister.persisted;
  }

  /** Adds a session with what its member brings from before; returns the held cursors it must drop. */
  join(session: Session, rejoin: Rejoin = {}): number[] {
    const rejected = this.#state.join(session, rejoin);
    this.#persister.schedule();
    return rejected;
  }

  /** The next rollout to send `session`, or null; send it once `durable()` resolves (its lease is then on record). */
  next(session: Session): Lease | null {
    const lease = this.#state.next(session);
    this.#persister.schedule(); // the stream writes it sooner, through durable(), before it sends the rollout
    return lease;
  }

  ack(cursors: Iterable<number>): void {
    this.#state.ack(cursors);
    this.#persister.schedule();
  }

  leave(session: Session): void {
    this.#state.leave(session);
    this.#persister.schedule();
  }

  /** Resolves once every change made so far (leases given by `next()` included) is written. */
  durable(): Promise<void> {
    return this.#persister.durable();
  }

  /** Writes everything changed so far. */
  persist(): Promise<void> {
    return this.#persister.persist();
  }

  /** Writes what is pending; later changes (sessions ending as the gateway closes) stay in memory. */
  close(): Promise<void> {
    return this.#persister.close();
  }

  status() {
    const { name, committed, ...rest } = this.#state.status();
    return { name, committed, persisted: this.#persister.persisted, ...rest };
  }
}
