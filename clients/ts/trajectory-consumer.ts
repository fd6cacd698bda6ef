// Reads a gateway's trajectory stream as one member of a consumer group: subscribes, hands each rollout to
// `onRollout` (one at a time: the stream is not read while it runs, so a slow consumer holds the gateway back
// instead of buffering), heartbeats, acks, and reconnects with backoff when the gateway goes away. Rollouts not
// acked are re-delivered (at least once).
//
// Resubscribing, it tells the gateway what its owner holds unacked (`held`: they stay this member's, with their
// groups, so a group in progress is not split after a gateway restart) and re-sends every ack the gateway has
// not confirmed as persisted (one it lost would bring the rollout back to this member). Give the member a name
// that stays the same across restarts (`member`): the gateway keeps its leases and groups for it by that name
// while it is away. Held rollouts the gateway gave to another member meanwhile come back in `onRejected`: the
// owner must drop them.
import type { ClientDuplexStream, Client } from "@grpc/grpc-js";
import {
  channelCredentials,
  channelOptions,
  describeStatus,
  DEFAULT_MAX_MESSAGE_BYTES,
  grpcTarget,
  TrajectoryStreamClient,
  type AgreementMessage,
  type RolloutMessage,
  type StreamMessage,
  type SubscribeMessage,
  type TlsFiles,
} from "../../protocol/index.ts";
import { metadataFor } from "./unary.ts";

export interface TrajectoryConsumerOptions {
  /** host:port of the gateway's gRPC server. */
  address: string;
  token?: string | null;
  consumerGroup?: string;
  member?: string;
  maxInFlight?: number;
  leaseTimeoutMs?: number;
  maxMessageBytes?: number;
  /** TLS (CA, client certificate, server name); default: TLS with the system's roots beyond loopback, plaintext on it. */
  tls?: TlsFiles;
  onRollout(rollout: RolloutMessage): Promise<void> | void;
  onConnection?(connected: boolean, detail: string): void;
  /** Cursors (of this gateway) of rollouts the owner received and holds unacked; asked at each subscribe. */
  held?(): number[];
  /** Held cursors the gateway gave to another member meanwhile: drop those rollouts (not trained here). */
  onRejected?(cursors: number[]): Promise<void> | void;
}

const MAX_BACKOFF_MS = 2000;
/** Acks kept for re-sending at most (a gateway that never reports its persisted cursor would grow them forever). */
const MAX_UNCONFIRMED = 1_000_000;

export class TrajectoryConsumer {
  readonly address: string;
  readonly #options: TrajectoryConsumerOptions;
  readonly #client: Client;
  readonly #leaseTimeoutMs: number;
  #call: ClientDuplexStream<SubscribeMessage, StreamMessage> | null = null;
  #connected = false;
  #closed = false;
  /** Acks not written yet (given while not subscribed). */
  #pendingAcks: number[] = [];
  /** Acks the gateway may not have persisted (above the committed cursor it last reported). */
  readonly #unconfirmed = new Set<number>();
  #running: Promise<void> | null = null;
  #wakeBackoff: (() => void) | null = null;

  constructor(options: TrajectoryConsumerOptions) {
    this.#options = options;
    this.address = grpcTarget(options.address);
    this.#leaseTimeoutMs = options.leaseTimeoutMs ?? 30_000;
    const tls = channelCredentials(this.address, options.tls);
    this.#client = new TrajectoryStreamClient(this.address, tls.credentials, {
      ...channelOptions(options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES),
      ...tls.options,
    });
  }

  get connected(): boolean {
    return this.#connected;
  }

  start(): void {
    this.#running ??= this.#run();
  }

  /** Acks rollouts by cursor (now, or once reconnected). */
  ack(cursors: readonly number[]): void {
    if (cursors.length === 0) return;
    for (const c of cursors) this.#unconfirmed.add(c);
    for (const c of this.#unconfirmed) {
      if (this.#unconfirmed.size <= MAX_UNCONFIRMED) break;
      this.#unconfirmed.delete(c); // the oldest first
    }
    const call = this.#call;
    if (this.#connected && call && !call.writableEnded) call.write({ ack: { cursors: [...cursors] } });
    else this.#pendingAcks.push(...cursors);
  }

  /** Sends the gateway a trainer's agreement figures, for its live UI (best effort: dropped while not subscribed). */
  report(agreement: AgreementMessage): void {
    const call = this.#call;
    if (this.#connected && call && !call.writableEnded) call.write({ agreement });
  }

  async #run(): Promise<void> {
    let backoff = 100;
    while (!this.#closed) {
      const detail = await this.#session(() => {
        backoff = 100;
      });
      this.#connected = false;
      this.#options.onConnection?.(false, detail);
      if (this.#closed) break;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, backoff);
        this.#wakeBackoff = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.#wakeBackoff = null;
      backoff = Math.min(MAX_BACKOFF_MS, backoff * 2);
    }
  }

  /** One call, from subscribe to its end; returns why it ended. */
  async #session(onSubscribed: () => void): Promise<string> {
    const o = this.#options;
    const call = (
      this.#client as unknown as { subscribe(m: unknown): ClientDuplexStream<SubscribeMessage, StreamMessage> }
    ).subscribe(metadataFor(o.token));
    this.#call = call;
    call.on("error", () => {}); // surfaced through the iterator below
    this.#pendingAcks = []; // all in #unconfirmed, sent with the subscribe
    call.write({
      subscribe: {
        consumerGroup: o.consumerGroup ?? "",
        member: o.member ?? "",
        maxInFlight: o.maxInFlight ?? 0,
        leaseTimeoutMs: this.#leaseTimeoutMs,
        held: o.held?.() ?? [],
        acked: [...this.#unconfirmed],
      },
    });
    let lastReceived = Date.now();
    let busy = false;
    const beat = Math.max(100, Math.floor(this.#leaseTimeoutMs / 3));
    const timer = setInterval(() => {
      if (!call.writableEnded) call.write({ heartbeat: { atMs: Date.now() } });
      // The gateway heartbeats an idle stream; silence beyond the lease timeout means it is gone.
      if (!busy && Date.now() - lastReceived > this.#leaseTimeoutMs + beat) call.cancel();
    }, beat);
    try {
      for await (const message of call as AsyncIterable<StreamMessage>) {
        lastReceived = Date.now();
        if (message.kind === "subscribed") {
          const { sessionId, committedCursor, rejected } = message.subscribed;
          this.#confirmed(committedCursor);
          if (rejected.length) await o.onRejected?.(rejected); // before any rollout of this session
          this.#connected = true;
          onSubscribed();
          o.onConnection?.(true, `subscribed as ${sessionId}`);
          const acks = this.#pendingAcks.splice(0);
          if (acks.length) call.write({ ack: { cursors: acks } });
        } else if (message.kind === "heartbeat") {
          this.#confirmed(message.heartbeat.committedCursor ?? 0);
        } else if (message.kind === "rollout") {
          busy = true;
          try {
            await o.onRollout(message.rollout);
          } finally {
            busy = false;
            lastReceived = Date.now();
          }
        }
        if (this.#closed) break;
      }
      return "stream ended";
    } catch (error) {
      return describeStatus(error);
    } finally {
      clearInterval(timer);
      this.#call = null;
      if (!call.writableEnded) call.end();
      call.cancel();
    }
  }

  /** The gateway persisted everything at or below `cursor`: those acks need not be sent again. */
  #confirmed(cursor: number): void {
    for (const c of this.#unconfirmed) if (c <= cursor) this.#unconfirmed.delete(c);
  }

  /** Stops reading; acks given so far are sent before the stream is half-closed (up to 1 s). */
  async close(): Promise<void> {
    this.#closed = true;
    this.#wakeBackoff?.();
    const call = this.#call;
    if (call && !call.writableEnded) call.end();
    const timer = setTimeout(() => this.#call?.cancel(), 1000);
    await this.#running;
    clearTimeout(timer);
    this.#client.close();
  }
}
