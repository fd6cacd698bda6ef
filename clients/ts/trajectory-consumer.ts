// Reads a gateway's trajectory stream as one member of a consumer group: subscribes, hands each rollout to
// `onRollout` (one at a time: the stream is not read while it runs, so a slow consumer holds the gateway back
// instead of buffering), heartbeats, acks, and reconnects with backoff when the gateway goes away. Acks given
// while disconnected are sent after reconnecting; rollouts not acked are re-delivered (at least once).
import { credentials, type ClientDuplexStream, type Client } from "@grpc/grpc-js";
import {
  channelOptions,
  describeStatus,
  DEFAULT_MAX_MESSAGE_BYTES,
  grpcTarget,
  TrajectoryStreamClient,
  type RolloutMessage,
  type StreamMessage,
  type SubscribeMessage,
} from "../../rl-core/wire/index.ts";
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
  onRollout(rollout: RolloutMessage): Promise<void> | void;
  onConnection?(connected: boolean, detail: string): void;
}

const MAX_BACKOFF_MS = 2000;

export class TrajectoryConsumer {
  readonly address: string;
  readonly #options: TrajectoryConsumerOptions;
  readonly #client: Client;
  readonly #leaseTimeoutMs: number;
  #call: ClientDuplexStream<SubscribeMessage, StreamMessage> | null = null;
  #connected = false;
  #closed = false;
  #pendingAcks: number[] = [];
  #running: Promise<void> | null = null;
  #wakeBackoff: (() => void) | null = null;

  constructor(options: TrajectoryConsumerOptions) {
    this.#options = options;
    this.address = grpcTarget(options.address);
    this.#leaseTimeoutMs = options.leaseTimeoutMs ?? 30_000;
    this.#client = new TrajectoryStreamClient(
      this.address,
      credentials.createInsecure(),
      channelOptions(options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES),
    );
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
    const call = this.#call;
    if (this.#connected && call && !call.writableEnded) call.write({ ack: { cursors: [...cursors] } });
    else this.#pendingAcks.push(...cursors);
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
    const call = (this.#client as unknown as { subscribe(m: unknown): ClientDuplexStream<SubscribeMessage, StreamMessage> }).subscribe(
      metadataFor(o.token),
    );
    this.#call = call;
    call.on("error", () => {}); // surfaced through the iterator below
    call.write({
      subscribe: {
        consumerGroup: o.consumerGroup ?? "",
        member: o.member ?? "",
        maxInFlight: o.maxInFlight ?? 0,
        leaseTimeoutMs: this.#leaseTimeoutMs,
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
          this.#connected = true;
          onSubscribed();
          o.onConnection?.(true, `subscribed as ${message.subscribed.sessionId}`);
          const acks = this.#pendingAcks.splice(0);
          if (acks.length) call.write({ ack: { cursors: acks } });
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
