// A gateway worker's side of `rlgate serve --workers N`: tells the primary it listens, relays committed calls and
// rollouts to browsers connected to other workers (only while one is connected somewhere), and answers /metrics with
// every worker's figures, gathered by the primary.
import { Socket } from "node:net";
import type { Registry } from "prom-client";
import type { CallRecord, RolloutRecord } from "../../store/records.ts";
import type { AgreementRecord, ReplaySummary } from "../../store/reports.ts";
import type { Store } from "../../store/store.ts";
import { callEvent, rolloutEvent, type RelayedUiEvent, type RelayedUiEvents } from "../../ui/route.ts";
import type { PolicyState } from "../policy/gate.ts";
import { isRlgateMessage, type PrimaryMessage, type WorkerMessage } from "./messages.ts";

/** What a gateway's handlers use of the cluster it runs in (GatewayContext.cluster). */
export interface ClusterLink {
  /** This worker's slot (0..N-1; a restarted worker takes the slot of the one it replaces). */
  readonly slot: number;
  /** Calls and rollouts committed by the other workers, for the live UI. */
  readonly uiEvents: RelayedUiEvents;
  /** All workers' metrics, aggregated (counters and histograms summed), in Prometheus text. */
  metrics(): Promise<{ text: string; contentType: string }>;
}

type PolicyListener = (state: PolicyState) => void;

/** The IPC channel to the primary (the worker's `process`); a message may come with a connection. */
export interface PrimaryChannel {
  /** False once the primary is gone. */
  readonly connected?: boolean;
  send(message: WorkerMessage): unknown;
  on(event: "message", listener: (message: unknown, handle?: unknown) => void): unknown;
  off(event: "message", listener: (message: unknown, handle?: unknown) => void): unknown;
}

/** How long a /metrics request waits for the primary before it answers with this worker's figures only. */
const METRICS_WAIT_MS = 5_000;

type UiListener = (event: RelayedUiEvent, data: unknown) => void;

export class WorkerLink implements ClusterLink {
  readonly slot: number;
  readonly #channel: PrimaryChannel;
  readonly #uiListeners = new Set<UiListener>();
  readonly #metricsWaiting = new Map<number, (answer: { text: string; contentType: string }) => void>();
  #nextMetricsId = 0;
  #store: Store | null = null;
  #registry: Registry | null = null;
  #relaying = false;
  #relayWanted = false;
  #onShutdown: (() => void) | null = null;
  #onPolicy: PolicyListener | null = null;
  #closing = false;

  readonly uiEvents: RelayedUiEvents = {
    on: (listener) => {
      this.#uiListeners.add(listener);
      if (this.#uiListeners.size === 1) this.#channel.send({ type: "rlgate:ui-want", want: true });
    },
    off: (listener) => {
      if (!this.#uiListeners.delete(listener)) return;
      if (this.#uiListeners.size === 0) this.#channel.send({ type: "rlgate:ui-want", want: false });
    },
  };

  constructor(slot: number, channel: PrimaryChannel) {
    this.slot = slot;
    this.#channel = channel;
    channel.on("message", this.#onMessage);
  }

  /** The worker's store (whose committed calls are relayed) and metrics registry, once its gateway is built. */
  attach(store: Store, registry: Registry): void {
    this.#store = store;
    this.#registry = registry;
    this.#relay(this.#relayWanted); // asked for before the gateway was built
  }

  /** Tells the primary the gateway listens, and which replicas it serves. */
  ready(url: string, port: number, upstreams: string[]): void {
    this.#channel.send({ type: "rlgate:ready", url, port, upstreams });
  }

  /**
   * Serves the connections the primary hands over. Each is confirmed as it arrives, before a byte of it is read: the
   * primary then closes its copy, and one this worker dies holding is closed rather than handed to another. Once
   * closing, this worker declines them unread, and the primary hands each to another worker.
   */
  serveConnections(serve: (socket: Socket) => void): void {
    this.#channel.on("message", (message, handle) => {
      if (!isRlgateMessage<PrimaryMessage>(message) || message.type !== "rlgate:connection") return;
      if (!(handle instanceof Socket)) return; // the handle did not arrive: the primary closes it unconfirmed
      if (this.#closing) {
        handle.destroy();
        this.#channel.send({ type: "rlgate:declined", id: message.id });
        return;
      }
      this.#channel.send({ type: "rlgate:took", id: message.id });
      serve(handle);
    });
  }

  /** What to do when the primary asks this worker to close. */
  onShutdown(handler: () => void): void {
    this.#onShutdown = handler;
  }

  close(): void {
    if (this.#closing) return;
    this.#closing = true;
    if (this.#channel.connected !== false) this.#channel.send({ type: "rlgate:closing" });
    this.#relay(false);
    this.#channel.off("message", this.#onMessage);
    for (const answer of this.#metricsWaiting.values()) answer({ text: "", contentType: "text/plain" });
    this.#metricsWaiting.clear();
  }

  async metrics(): Promise<{ text: string; contentType: string }> {
    const id = this.#nextMetricsId++;
    const own = this.#registry;
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.#metricsWaiting.delete(id);
        // The primary did not answer (it is busy or gone): this worker's own figures, said so.
        void own?.metrics().then((text) =>
          resolve({
            text: `# rlgate: the other workers did not answer within ${METRICS_WAIT_MS} ms; worker ${this.slot} only\n${text}`,
            contentType: own.contentType,
          }),
        );
      }, METRICS_WAIT_MS);
      this.#metricsWaiting.set(id, (answer) => {
        clearTimeout(timer);
        resolve(answer);
      });
      this.#channel.send({ type: "rlgate:metrics-ask", id });
    });
  }

  /** Tells the other workers (through the primary) the weight-update state this worker reached. */
  sendPolicy(state: PolicyState): void {
    if (this.#channel.connected !== false) this.#channel.send({ type: "rlgate:policy", state });
  }

  /** Hears the weight-update states other workers reached. */
  onPolicy(listener: PolicyListener): void {
    this.#onPolicy = listener;
  }

  readonly #onMessage = (message: unknown): void => {
    if (!isRlgateMessage<PrimaryMessage>(message)) return;
    switch (message.type) {
      case "rlgate:policy":
        this.#onPolicy?.(message.state);
        return;
      case "rlgate:ui-relay":
        return this.#relay(message.on);
      case "rlgate:ui-event":
        for (const listener of this.#uiListeners) listener(message.event, message.data);
        return;
      case "rlgate:metrics-collect":
        void this.#registry?.getMetricsAsJSON().then(
          (metrics) => this.#channel.send({ type: "rlgate:metrics-part", id: message.id, metrics }),
          () => this.#channel.send({ type: "rlgate:metrics-part", id: message.id, metrics: [] }),
        );
        return;
      case "rlgate:metrics-text": {
        const answer = this.#metricsWaiting.get(message.id);
        this.#metricsWaiting.delete(message.id);
        answer?.({ text: message.text, contentType: message.contentType });
        return;
      }
      case "rlgate:shutdown":
        this.#onShutdown?.();
        return;
    }
  };

  readonly #onCall = (call: CallRecord) =>
    this.#channel.send({ type: "rlgate:ui-event", event: "call", data: callEvent(call) });
  readonly #onRollout = (rollout: RolloutRecord) =>
    this.#channel.send({ type: "rlgate:ui-event", event: "rollout", data: rolloutEvent(rollout) });
  readonly #onAgreement = (record: AgreementRecord) =>
    this.#channel.send({ type: "rlgate:ui-event", event: "agreement", data: record });
  readonly #onReplay = (record: ReplaySummary) =>
    this.#channel.send({ type: "rlgate:ui-event", event: "replay", data: record });

  /** Sends this worker's committed calls and rollouts to the primary while some browser listens. */
  #relay(on: boolean): void {
    this.#relayWanted = on;
    const store = this.#store;
    if (!store || on === this.#relaying) return;
    this.#relaying = on;
    const method = on ? "on" : "off";
    store.events[method]("call", this.#onCall);
    store.events[method]("rollout", this.#onRollout);
    store.events[method]("agreement", this.#onAgreement);
    store.events[method]("replay", this.#onReplay);
  }
}
