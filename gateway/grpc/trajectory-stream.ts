// The TrajectoryStream service: one bidirectional call per member session. The member subscribes, then acks and
// heartbeats; the gateway leases it rollouts from its consumer group and sends them one at a time, each once its
// lease is persisted and the previous one was handed to HTTP/2 (a member that stops reading stops its session's
// reads of the store).
import { randomBytes } from "node:crypto";
import { status as Status, type ServerDuplexStream } from "@grpc/grpc-js";
import type { Store } from "../../store/store.ts";
import { lineLogger, type Logger } from "../../util/log.ts";
import {
  checkToken,
  errorToStatus,
  isOpen,
  LinkError,
  send,
  type AgreementMessage,
  type EncodedStreamMessage,
  type StreamMessage,
  type SubscribeMessage,
  type SubscribeRequest,
} from "../../protocol/index.ts";
import { TrajectoryWorkerUnavailable, type TrajectoryThread } from "../trajectory-thread.ts";
import { ConsumerGroup, type Lease, type Session } from "./consumer-group.ts";
import { bareRolloutMessage } from "./rollout-message.ts";

export const DEFAULT_CONSUMER_GROUP = "rl-core";
export const DEFAULT_MAX_IN_FLIGHT = 1024;
export const DEFAULT_LEASE_TIMEOUT_MS = 30_000;
const MIN_LEASE_TIMEOUT_MS = 500;
/** How often an idle session looks for newly finished rollouts. */
const POLL_MS = 50;
const SUBSCRIBE_TIMEOUT_MS = 10_000;
const MAX_AGREEMENT_HARNESSES = 64;

export interface TrajectoryStreamOptions {
  store: Store;
  /** Builds the message a rollout is sent as (on the trajectory worker, off the event loop). */
  trajectories: TrajectoryThread;
  maxMessageBytes: number;
  token: string | null;
  log: Logger;
  /** How long a named member's rollouts and groups wait for it while it is away; default MEMBER_TIMEOUT_MS. */
  memberTimeoutMs?: number;
  /** How long a fully acked group stays with its member for late rollouts; default GROUP_RETENTION_MS. */
  groupRetentionMs?: number;
}

type Call = ServerDuplexStream<SubscribeMessage, StreamMessage>;

class MemberSession implements Session {
  readonly id = `s_${randomBytes(6).toString("hex")}`;
  readonly member: string;
  readonly named: boolean;
  readonly maxInFlight: number;
  readonly leaseTimeoutMs: number;
  inFlight = 0;
  scanPos = 0;
  epoch = 0;
  lastHeard = Date.now();
  #waiter: (() => void) | null = null;

  constructor(request: SubscribeRequest, peer: string) {
    this.member = request.member || peer;
    this.named = request.member !== "";
    this.maxInFlight = request.maxInFlight > 0 ? request.maxInFlight : DEFAULT_MAX_IN_FLIGHT;
    this.leaseTimeoutMs =
      request.leaseTimeoutMs > 0 ? Math.max(MIN_LEASE_TIMEOUT_MS, request.leaseTimeoutMs) : DEFAULT_LEASE_TIMEOUT_MS;
  }

  wake(): void {
    const w = this.#waiter;
    this.#waiter = null;
    w?.();
  }

  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => this.wake(), ms);
      this.#waiter = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }
}

export class TrajectoryStreamService {
  readonly #options: TrajectoryStreamOptions;
  readonly #log: Logger;
  readonly #groups = new Map<string, ConsumerGroup>();
  readonly #calls = new Set<Call>();

  constructor(options: TrajectoryStreamOptions) {
    this.#options = options;
    this.#log = options.log.child({ component: "trajectory-stream" });
  }

  group(name: string): ConsumerGroup {
    let group = this.#groups.get(name);
    if (!group) {
      const { store, memberTimeoutMs, groupRetentionMs } = this.#options;
      group = new ConsumerGroup(name, store, { memberTimeoutMs, groupRetentionMs, log: lineLogger(this.#log, "warn") });
      this.#groups.set(name, group);
    }
    return group;
  }

  readonly subscribe = (call: Call): void => {
    this.#calls.add(call);
    call.once("close", () => this.#calls.delete(call));
    void this.#serve(call).catch((error) => {
      const status = errorToStatus(error, lineLogger(this.#log, "error")); // an internal error is logged there, with its stack
      if (status.code !== Status.INTERNAL) this.#log.warn(status.details);
      if (isOpen(call)) call.emit("error", status);
    });
  };

  async #serve(call: Call): Promise<void> {
    checkToken(call.metadata, this.#options.token);
    // Set by the subscribe message's handler (join happens there, so acks right behind it find the group).
    let session = null as MemberSession | null;
    let group = null as ConsumerGroup | null;
    let rejected: number[] = [];
    let ended = false;
    let watchdog: NodeJS.Timeout | null = null;
    const end = (error?: LinkError) => {
      if (ended) return;
      ended = true;
      if (watchdog) clearInterval(watchdog);
      if (group && session) group.leave(session);
      session?.wake();
      if (!isOpen(call)) return;
      if (error) call.emit("error", errorToStatus(error));
      else call.end();
    };
    const subscribed = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new LinkError("RLGATE_BAD_REQUEST", `no subscribe message within ${SUBSCRIBE_TIMEOUT_MS} ms`)),
        SUBSCRIBE_TIMEOUT_MS,
      );
      call.on("data", (message: SubscribeMessage) => {
        if (session) session.lastHeard = Date.now();
        if (message.kind === "subscribe" && !session) {
          clearTimeout(timer);
          const request: SubscribeRequest = message.subscribe;
          session = new MemberSession(request, call.getPeer());
          group = this.group(request.consumerGroup || DEFAULT_CONSUMER_GROUP);
          rejected = group.join(session, { held: request.held, acked: request.acked });
          if (!session.named) {
            this.#log.warn(
              `a member without a name (${session.member}) joined '${group.name}': its leases are not kept across restarts, so a rollout it held may be trained twice; give each member a name (rlgate core --member)`,
            );
          }
          if (rejected.length)
            this.#log.info({ member: session.member }, `${rejected.length} held rollouts went elsewhere meanwhile`);
          resolve();
        } else if (message.kind === "ack" && group) {
          group.ack(message.ack.cursors);
        } else if (message.kind === "agreement" && session) {
          this.#agreement(message.agreement, session.member);
        } else if (message.kind === "subscribe") {
          end(new LinkError("RLGATE_BAD_REQUEST", "subscribe sent twice on one call"));
        } else if (!session && message.kind !== "heartbeat") {
          clearTimeout(timer);
          reject(new LinkError("RLGATE_BAD_REQUEST", "the first message must be subscribe"));
        }
      });
      for (const event of ["end", "cancelled", "close", "error"] as const) {
        call.once(event, () => {
          clearTimeout(timer);
          reject(new LinkError("RLGATE_CANCELLED", "the member left before subscribing"));
          end();
        });
      }
    });
    await subscribed;
    const s = session!;
    const g = group!;
    const heartbeatMs = Math.max(100, Math.floor(s.leaseTimeoutMs / 3));
    watchdog = setInterval(
      () => {
        if (Date.now() - s.lastHeard > s.leaseTimeoutMs) {
          this.#log.warn({ member: s.member }, `member silent for ${s.leaseTimeoutMs} ms, leases released`);
          end(new LinkError("RLGATE_SESSION_EXPIRED", `no message from the member for ${s.leaseTimeoutMs} ms`));
        }
      },
      Math.min(1000, heartbeatMs),
    );
    watchdog.unref();
    await g.durable(); // what it claimed is on record before it is told so
    await send(call, {
      subscribed: {
        sessionId: s.id,
        committedCursor: g.persisted,
        maxMessageBytes: this.#options.maxMessageBytes,
        rejected,
      },
    });
    try {
      await this.#deliver(call, s, g, () => ended);
    } catch (error) {
      // The session ends with the error (its leases go back to the group, to wait for the member where named).
      const message = error instanceof Error ? error.message : String(error);
      this.#log.warn({ member: s.member }, message);
      end(error instanceof LinkError ? error : new LinkError("RLGATE_INTERNAL", message));
      return;
    }
    end();
  }

  /** Sends the session its rollouts and heartbeats until it ends. */
  async #deliver(call: Call, s: MemberSession, g: ConsumerGroup, ended: () => boolean): Promise<void> {
    const heartbeatMs = Math.max(100, Math.floor(s.leaseTimeoutMs / 3));
    // Heartbeats go out busy or idle: they tell an idle member the gateway is alive, and every member which
    // acks are persisted (it keeps the others to re-send after a gateway restart).
    let lastBeat = Date.now();
    while (!ended() && isOpen(call)) {
      const sinceBeat = Date.now() - lastBeat;
      const lease = sinceBeat < heartbeatMs ? g.next(s) : null;
      if (lease) {
        const durable = g.durable(); // written while the message is built (on the trajectory worker)
        durable.catch(() => {}); // a failure is handled below, once the message is built
        const message = await this.#message(lease);
        try {
          await durable;
        } catch (error) {
          throw new LinkError(
            "RLGATE_INTERNAL",
            `the consumer group's state could not be written: ${error instanceof Error ? error.message : String(error)}`,
            { cause: error },
          );
        }
        try {
          await send(call, message);
        } catch {
          break; // the session is over; leave() gives its leases back
        }
        continue;
      }
      if (sinceBeat >= heartbeatMs) {
        try {
          await send(call, { heartbeat: { atMs: Date.now(), committedCursor: g.persisted } });
        } catch {
          break;
        }
        lastBeat = Date.now();
        continue;
      }
      await s.sleep(Math.min(POLL_MS, heartbeatMs - sinceBeat));
    }
  }

  /**
   * The rollout's stream message, serialized by the trajectory worker. A rollout the worker cannot rebuild is sent
   * bare and flagged (never trained) rather than blocking the stream; a worker that is not there (crashed, or the
   * gateway is closing) is tried once more, then ends the session: the lease waits for its member, nothing is flagged.
   */
  async #message(lease: Lease): Promise<StreamMessage | EncodedStreamMessage> {
    const { trajectories, maxMessageBytes } = this.#options;
    for (let attempt = 1; ; attempt++) {
      try {
        return await trajectories.message(lease.cursor, lease.rollout, maxMessageBytes);
      } catch (error) {
        const reason = error instanceof Error ? error.message : String(error);
        if (error instanceof TrajectoryWorkerUnavailable) {
          if (attempt < 2) continue; // a crashed worker is started again by the next request
          throw new LinkError("RLGATE_UNAVAILABLE", `the gateway cannot build rollouts now (${reason}); reconnect`, {
            cause: error,
          });
        }
        this.#log.error({ rollout: lease.rollout.id, err: error }, "reconstruction failed");
        return { rollout: bareRolloutMessage(lease.cursor, lease.rollout, [`reconstruction failed: ${reason}`]) };
      }
    }
  }

  /** A trainer's agreement figures from a core: kept for the live UI (bounded; a bad one is dropped, said once). */
  #agreement(a: AgreementMessage, member: string): void {
    const finite = (x: number) => (Number.isFinite(x) ? x : null);
    const harnesses = a.harnesses.slice(0, MAX_AGREEMENT_HARNESSES).map((h) => ({
      harness: h.harness.slice(0, 200),
      tokens: h.tokens,
      pearson: finite(h.pearson),
      k3Kl: finite(h.k3Kl),
      absDiffMean: finite(h.absDiffMean),
      absDiffP50: finite(h.absDiffP50),
      absDiffP99: finite(h.absDiffP99),
      absDiffMax: finite(h.absDiffMax),
    }));
    if (harnesses.length === 0) return;
    const at = Number.isFinite(a.atMs) && a.atMs > 0 ? a.atMs : Date.now();
    this.#options.store
      .putAgreement({ at, batchId: a.batchId, core: (a.member || member).slice(0, 200), harnesses })
      .catch((error) => this.#log.warn({ err: error }, "agreement figures not stored"));
  }

  status() {
    return [...this.#groups.values()].map((g) => g.status());
  }

  async close(): Promise<void> {
    for (const call of this.#calls) if (isOpen(call)) call.end();
    await Promise.all([...this.#groups.values()].map((g) => g.close()));
  }
}
