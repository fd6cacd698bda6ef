// The primary of `rlgate serve --workers N`: listens on the gateway's port and hands each new connection to the next
// worker (connection-handoff.ts), forks the gateway workers (node:cluster), starts a new one in the slot of any that
// dies, and carries what crosses workers: the live UI's events and /metrics requests. It serves no harness calls.
import cluster, { type Worker } from "node:cluster";
import { ConnectionHandoff } from "./connection-handoff.ts";
import { AggregatorRegistry, Counter, Gauge, type Registry } from "prom-client";
import {
  isRlgateMessage,
  type MetricsJson,
  type PolicyMessage,
  type PrimaryMessage,
  type UiEventMessage,
  type WorkerMessage,
} from "./messages.ts";

export interface ClusterPrimaryOptions {
  workers: number;
  /** Where the gateway listens (port 0: a free port, chosen once). */
  host: string;
  port: number;
  /**
   * Extra environment of each worker (its slot is added as RLGATE_WORKER_SLOT / RLGATE_WORKER_SLOTS, the port it
   * serves as RLGATE_WORKER_PORT).
   */
  env: Record<string, string>;
  /** A line for the operator (a worker died, was restarted). */
  log: (line: string) => void;
  /** The primary's own metrics (worker restarts, live workers), summed into every /metrics answer. */
  registry: Registry;
  /** How long a closing worker may take before it is killed (default 30 s). */
  closeTimeoutMs?: number;
}

interface Slot {
  index: number;
  worker: Worker | null;
  ready: boolean;
  startedAt: number;
  /** Consecutive deaths soon after a start: the next start waits longer. */
  quickDeaths: number;
  /** Whether the worker in it replaces one that died. */
  replacement: boolean;
  timer: NodeJS.Timeout | null;
}

interface MetricsRequest {
  asker: Worker;
  /** The asker's own id of its request. */
  askerId: number;
  parts: MetricsJson[];
  waiting: Set<Worker>;
  timer: NodeJS.Timeout;
}

/** A worker that lives this long has started fine: its death restarts it at once. */
const HEALTHY_AFTER_MS = 10_000;
const MAX_RESTART_DELAY_MS = 30_000;
const METRICS_COLLECT_MS = 3_000;

export class ClusterPrimary {
  readonly #options: ClusterPrimaryOptions;
  readonly #slots: Slot[];
  readonly #uiWanted = new Set<Worker>();
  readonly #metricsRequests = new Map<number, MetricsRequest>();
  readonly #restarts: Counter;
  readonly #live: Gauge;
  readonly #connections: ConnectionHandoff;
  #port = 0;
  #nextMetricsId = 0;
  #closing = false;
  #address: { url: string; port: number } | null = null;
  /** The latest weight-update state a worker reached (gateway/policy), for workers that start later. */
  #policy: PolicyMessage | null = null;

  constructor(options: ClusterPrimaryOptions) {
    this.#options = options;
    this.#connections = new ConnectionHandoff({ log: options.log });
    this.#slots = Array.from({ length: options.workers }, (_, index) => ({
      index,
      worker: null,
      ready: false,
      startedAt: 0,
      quickDeaths: 0,
      replacement: false,
      timer: null,
    }));
    this.#restarts = new Counter({
      name: "rlgate_worker_restarts_total",
      help: "Gateway workers started again after one died (rlgate serve --workers)",
      registers: [options.registry],
    });
    this.#live = new Gauge({
      name: "rlgate_workers",
      help: "Gateway workers listening (rlgate serve --workers)",
      registers: [options.registry],
      collect: () => this.#live.set(this.#slots.filter((s) => s.ready).length),
    });
  }

  /**
   * Listens, then starts the first worker, then the others once it serves (so that a gateway that cannot start says
   * why once). Resolves with the address they share; rejects when the port cannot be listened on, or when a worker
   * exits before it serves (its own error is on stderr).
   */
  async start(): Promise<{ url: string; port: number; upstreams: string[] }> {
    this.#port = await this.#connections.listen(this.#options.port, this.#options.host);
    cluster.on("message", this.#onMessage);
    cluster.on("exit", this.#onExit);
    const first = await this.#startAndWait(this.#slots[0]!);
    await Promise.all(this.#slots.slice(1).map((slot) => this.#startAndWait(slot)));
    return first;
  }

  /** Process ids of the live workers, by slot. */
  pids(): Array<number | null> {
    return this.#slots.map((slot) => slot.worker?.process.pid ?? null);
  }

  #fork(slot: Slot): Worker {
    const worker = cluster.fork({
      ...this.#options.env,
      RLGATE_WORKER_SLOT: String(slot.index),
      RLGATE_WORKER_SLOTS: String(this.#slots.length),
      RLGATE_WORKER_PORT: String(this.#port),
    });
    slot.worker = worker;
    slot.ready = false;
    slot.startedAt = Date.now();
    return worker;
  }

  #startAndWait(slot: Slot): Promise<{ url: string; port: number; upstreams: string[] }> {
    const worker = this.#fork(slot);
    return new Promise((resolve, reject) => {
      const onMessage = (message: unknown) => {
        if (!isRlgateMessage<WorkerMessage>(message) || message.type !== "rlgate:ready") return;
        cleanup();
        resolve({ url: message.url, port: message.port, upstreams: message.upstreams });
      };
      const onExit = (code: number | null, signal: string | null) => {
        cleanup();
        reject(
          new Error(
            `gateway worker ${slot.index} exited before it listened (${signal ?? `exit code ${code}`}); its error is above`,
          ),
        );
      };
      const cleanup = () => {
        worker.off("message", onMessage);
        worker.off("exit", onExit);
      };
      worker.on("message", onMessage);
      worker.once("exit", onExit);
    });
  }

  #slotOf(worker: Worker): Slot | undefined {
    return this.#slots.find((slot) => slot.worker === worker);
  }

  readonly #onExit = (worker: Worker, code: number | null, signal: string | null): void => {
    this.#connections.remove(worker);
    this.#uiWanted.delete(worker);
    this.#updateUiRelay();
    for (const [id, request] of this.#metricsRequests) {
      if (request.waiting.delete(worker) && request.waiting.size === 0) this.#answerMetrics(id);
    }
    const slot = this.#slotOf(worker);
    if (!slot) return;
    const wasReady = slot.ready;
    slot.worker = null;
    slot.ready = false;
    // A first start's failure is start()'s to report; a replacement that dies before it listens is tried again.
    if (this.#closing || (!wasReady && !slot.replacement)) return;
    const lived = Date.now() - slot.startedAt;
    slot.quickDeaths = lived < HEALTHY_AFTER_MS ? slot.quickDeaths + 1 : 0;
    const delay = slot.quickDeaths === 0 ? 0 : Math.min(MAX_RESTART_DELAY_MS, 500 * 2 ** (slot.quickDeaths - 1));
    this.#options.log(
      `gateway worker ${slot.index} (pid ${worker.process.pid}) exited (${signal ?? `exit code ${code}`}); ` +
        (delay
          ? `starting a new one in ${delay} ms (it died ${slot.quickDeaths}× soon after starting)`
          : "starting a new one"),
    );
    slot.timer = setTimeout(() => {
      slot.timer = null;
      if (this.#closing) return;
      this.#restarts.inc();
      slot.replacement = true;
      this.#fork(slot);
    }, delay);
  };

  readonly #onMessage = (worker: Worker, message: unknown): void => {
    if (!isRlgateMessage<WorkerMessage>(message)) return;
    switch (message.type) {
      case "rlgate:ready": {
        const slot = this.#slotOf(worker);
        if (slot) slot.ready = true;
        this.#connections.add(worker);
        this.#address ??= { url: message.url, port: message.port };
        if (this.#uiWanted.size > 0) this.#send(worker, { type: "rlgate:ui-relay", on: true });
        // A worker started during a pause (a replacement) holds calls as the others do.
        if (this.#policy) this.#send(worker, this.#policy);
        if (slot?.replacement)
          this.#options.log(`gateway worker ${slot.index} (pid ${worker.process.pid}) listens again`);
        return;
      }
      case "rlgate:took":
        return this.#connections.took(worker, message.id);
      case "rlgate:declined":
        return this.#connections.declined(worker, message.id);
      case "rlgate:closing":
        return this.#connections.retire(worker);
      case "rlgate:ui-want":
        if (message.want) this.#uiWanted.add(worker);
        else this.#uiWanted.delete(worker);
        return this.#updateUiRelay();
      case "rlgate:ui-event":
        for (const other of this.#uiWanted) if (other !== worker) this.#send(other, message);
        return;
      case "rlgate:policy":
        this.#policy = message;
        for (const slot of this.#slots)
          if (slot.worker && slot.ready && slot.worker !== worker) this.#send(slot.worker, message);
        return;
      case "rlgate:metrics-ask":
        return this.#collectMetrics(worker, message.id);
      case "rlgate:metrics-part": {
        const request = this.#metricsRequests.get(message.id);
        if (!request || !request.waiting.delete(worker)) return;
        request.parts.push(message.metrics);
        if (request.waiting.size === 0) this.#answerMetrics(message.id);
        return;
      }
    }
  };

  /** An event of the primary's own (the trajectory stream records trainers' agreement figures) for the live UI. */
  relayUi(event: UiEventMessage["event"], data: unknown): void {
    for (const worker of this.#uiWanted) this.#send(worker, { type: "rlgate:ui-event", event, data });
  }

  #send(worker: Worker, message: PrimaryMessage): void {
    if (worker.isConnected()) worker.send(message, (error: Error | null) => void error); // a worker gone meanwhile
  }

  #relayOn = false;

  /** Workers relay their events while a browser is connected to any worker. */
  #updateUiRelay(): void {
    const on = this.#uiWanted.size > 0;
    if (on === this.#relayOn) return;
    this.#relayOn = on;
    for (const slot of this.#slots)
      if (slot.worker && slot.ready) this.#send(slot.worker, { type: "rlgate:ui-relay", on });
  }

  #collectMetrics(asker: Worker, askerId: number): void {
    const id = this.#nextMetricsId++;
    const waiting = new Set(this.#slots.flatMap((slot) => (slot.worker && slot.ready ? [slot.worker] : [])));
    const request: MetricsRequest = {
      asker,
      askerId,
      parts: [],
      waiting,
      // A worker that does not answer in time (busy, dying) is left out of this answer.
      timer: setTimeout(() => this.#answerMetrics(id), METRICS_COLLECT_MS),
    };
    this.#metricsRequests.set(id, request);
    for (const worker of waiting) this.#send(worker, { type: "rlgate:metrics-collect", id });
    if (waiting.size === 0) this.#answerMetrics(id);
  }

  #answerMetrics(id: number): void {
    const request = this.#metricsRequests.get(id);
    if (!request) return;
    this.#metricsRequests.delete(id);
    clearTimeout(request.timer);
    void this.#options.registry.getMetricsAsJSON().then(async (own) => {
      const registry = AggregatorRegistry.aggregate([...request.parts, own]);
      const text = await registry.metrics();
      this.#send(request.asker, {
        type: "rlgate:metrics-text",
        id: request.askerId,
        text,
        contentType: registry.contentType,
      });
    });
  }

  /** Asks every worker to close (each finishes its committed work and exits), kills any that do not in time. */
  async close(): Promise<void> {
    this.#closing = true;
    this.#connections.close();
    for (const slot of this.#slots) if (slot.timer) clearTimeout(slot.timer);
    const exits = this.#slots.flatMap((slot) => {
      const worker = slot.worker;
      if (!worker || worker.isDead()) return [];
      return [
        new Promise<void>((resolve) => {
          worker.once("exit", () => resolve());
          const kill = setTimeout(() => worker.process.kill("SIGKILL"), this.#options.closeTimeoutMs ?? 30_000);
          kill.unref();
          worker.once("exit", () => clearTimeout(kill));
          // A worker still starting (a replacement) cannot take the message yet: SIGTERM ends it, or closes it once
          // its gateway has started (its handler is set before it says it serves).
          if (slot.ready) this.#send(worker, { type: "rlgate:shutdown" });
          else worker.process.kill("SIGTERM");
        }),
      ];
    });
    await Promise.all(exits);
    cluster.off("message", this.#onMessage);
    cluster.off("exit", this.#onExit);
  }
}
