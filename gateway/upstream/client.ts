// The upstream: one or more inference replicas (data-parallel vLLM or SGLang servers) behind one gateway. Every call
// of a rollout goes to one replica while it is healthy — consistent hashing on the rollout id, so the replica whose KV
// cache holds the rollout's prefix serves its next turn — and calls without a rollout go to the replica with the
// fewest requests outstanding. Replicas that fail are ejected and come back when health checks pass (replica.ts);
// a rollout whose replica is out continues on the next replica of its ring walk. With one replica nothing of this
// changes what a call does.
import type { Dispatcher } from "undici";
import { silentLogger, type Logger } from "../../util/log.ts";
import { HashRing } from "./hash-ring.ts";
import { isConnectFailure, ReplicaAttempt, type LegacyHandler } from "./replica-attempt.ts";
import { Replica, type ReplicaSettings, type ReplicaStateListener } from "./replica.ts";
import { readUpstreamsFile, UpstreamListError, watchUpstreamsFile, type UpstreamsFileWatch } from "./upstream-list.ts";

/** sticky (default): by rollout; round-robin: every call to the next replica (a baseline for bench/replicas.ts). */
export type Routing = "sticky" | "round-robin";
export const ROUTINGS: readonly Routing[] = ["sticky", "round-robin"];

export interface UpstreamOptions {
  /** Replica base URLs (at least one, unless `file` lists them). */
  urls?: readonly string[];
  /** An upstreams file (one URL per line, `#` comments), watched: the replicas follow its changes. */
  file?: string;
  /** Bearer token for the upstream (rollout keys never travel upstream). */
  apiKey?: string;
  /** Connections per replica. */
  connections?: number;
  /** Milliseconds to wait for response headers / between body chunks. */
  headersTimeoutMs?: number;
  bodyTimeoutMs?: number;
  /** How often each replica's `GET /health` is asked (default 5 s) while there is more than one replica. */
  healthIntervalMs?: number;
  routing?: Routing;
  log?: Logger;
}

/** A request without a rollout, sent to the least busy replica (model card, tokenize). */
export interface UpstreamRequest {
  method: "GET" | "POST";
  /** Route without the replica's base path, e.g. /v1/models. */
  path: string;
  headers?: Record<string, string>;
  body?: string;
}

export const DEFAULT_HEALTH_INTERVAL_MS = 5_000;

export class Upstream {
  readonly apiKey: string | undefined;
  readonly headersTimeoutMs: number;
  readonly bodyTimeoutMs: number;
  readonly routing: Routing;
  readonly #settings: ReplicaSettings;
  readonly #log: Logger;
  readonly #healthIntervalMs: number;
  #replicas: Replica[] = [];
  #ring: HashRing<Replica> = new HashRing<Replica>([], (r) => r.url);
  #next = 0;
  #healthTimer: NodeJS.Timeout | null = null;
  #fileWatch: UpstreamsFileWatch | null = null;
  #closed = false;
  #checking = false;

  constructor(options: UpstreamOptions) {
    this.apiKey = options.apiKey;
    this.headersTimeoutMs = options.headersTimeoutMs ?? 600_000;
    this.bodyTimeoutMs = options.bodyTimeoutMs ?? 600_000;
    this.routing = options.routing ?? "sticky";
    this.#log = options.log ?? silentLogger;
    this.#healthIntervalMs = options.healthIntervalMs ?? DEFAULT_HEALTH_INTERVAL_MS;
    this.#settings = {
      connections: options.connections ?? 256,
      headersTimeoutMs: this.headersTimeoutMs,
      bodyTimeoutMs: this.bodyTimeoutMs,
    };
    const file = options.file;
    const urls = [...(options.urls ?? []), ...(file ? readUpstreamsFile(file) : [])];
    if (urls.length === 0)
      throw new UpstreamListError("no upstream: give --upstream URL[,URL…] or --upstreams-file FILE");
    this.setUrls(urls);
    if (file) {
      this.#fileWatch = watchUpstreamsFile(
        file,
        (listed) => {
          const next = [...new Set([...(options.urls ?? []), ...listed])];
          this.#log.info({ file, replicas: next }, "upstreams file changed: replicas updated");
          this.setUrls(next);
        },
        (error) => this.#log.error({ file }, `${error.message}; keeping the replicas ${this.urls.join(", ")}`),
      );
    }
    this.#healthTimer = setInterval(() => this.#checkHealth(), this.#healthIntervalMs);
    this.#healthTimer.unref();
  }

  get replicas(): readonly Replica[] {
    return this.#replicas;
  }

  get urls(): string[] {
    return this.#replicas.map((r) => r.url);
  }

  /** Replaces the replica list: replicas kept keep their connections and figures; removed ones finish what they run. */
  setUrls(urls: readonly string[]): void {
    const old = new Map(this.#replicas.map((r) => [r.url, r]));
    const onState: ReplicaStateListener = (replica, state, reason) =>
      state === "ejected"
        ? this.#log.warn({ replica: replica.url, reason }, "replica ejected")
        : this.#log.info({ replica: replica.url, reason }, "replica returned");
    this.#replicas = [...new Set(urls)].map((url) => old.get(url) ?? new Replica(url, this.#settings, onState));
    for (const [url, replica] of old) if (!urls.includes(url)) void replica.pool.close().catch(() => {});
    this.#ring = new HashRing(this.#replicas, (r) => r.url);
  }

  /**
   * The replica for a call: a rollout's own (the first healthy one on its ring walk), or — without a rollout — the
   * healthy one with the fewest requests in flight. Replicas in `exclude` were tried already. When no replica is
   * healthy the call still goes to one (an ejection may be stale); null when every replica was tried.
   */
  pick(rolloutId: string | null, exclude?: ReadonlySet<Replica>): Replica | null {
    const usable = (r: Replica) => !exclude?.has(r);
    if (this.routing === "round-robin") return this.#roundRobin(usable);
    if (rolloutId !== null) {
      let fallback: Replica | null = null;
      for (const replica of this.#ring.walk(rolloutId)) {
        if (!usable(replica)) continue;
        if (replica.healthy) return replica;
        fallback ??= replica;
      }
      return fallback;
    }
    return this.#leastOutstanding(usable);
  }

  #leastOutstanding(usable: (r: Replica) => boolean): Replica | null {
    const n = this.#replicas.length;
    // Ties go round the list from a moving start, so idle replicas share the calls.
    const start = this.#next++ % n;
    let best: Replica | null = null;
    for (let i = 0; i < n; i++) {
      const replica = this.#replicas[(start + i) % n]!;
      if (!usable(replica)) continue;
      if (
        best === null ||
        (replica.healthy && !best.healthy) ||
        (replica.healthy === best.healthy && replica.inFlight < best.inFlight)
      )
        best = replica;
    }
    return best;
  }

  #roundRobin(usable: (r: Replica) => boolean): Replica | null {
    const n = this.#replicas.length;
    let fallback: Replica | null = null;
    for (let i = 0; i < n; i++) {
      const replica = this.#replicas[this.#next++ % n]!;
      if (!usable(replica)) continue;
      if (replica.healthy) return replica;
      fallback ??= replica;
    }
    return fallback;
  }

  /**
   * Sends a request to the call's replica through `handler`. A replica that refuses the connection is ejected and
   * the call goes to the next one (nothing reached the refusing replica); `onReplica` hears each replica tried, the
   * last being the one that served or failed the call. `path` is the route without the replica's base path.
   */
  dispatch(
    rolloutId: string | null,
    request: Omit<Dispatcher.DispatchOptions, "path"> & { path: string },
    handler: LegacyHandler,
    onReplica?: (replica: Replica, retriedAfter: Error | null) => void,
  ): void {
    const tried = new Set<Replica>();
    const send = (replica: Replica, after: Error | null) => {
      tried.add(replica);
      onReplica?.(replica, after);
      const attempt = new ReplicaAttempt(replica, handler, (error) => {
        const next = this.#closed ? null : this.pick(rolloutId, tried);
        if (next === null) return false;
        send(next, error);
        return true;
      });
      replica.pool.dispatch({ ...request, path: replica.basePath + request.path }, attempt);
    };
    send(this.pick(rolloutId)!, null);
  }

  /** A small request without a rollout (least busy replica), counted in its replica's figures. */
  async request(options: UpstreamRequest): Promise<Dispatcher.ResponseData> {
    const replica = this.pick(null)!;
    const headers = { ...options.headers };
    if (this.apiKey && headers["authorization"] === undefined) headers["authorization"] = `Bearer ${this.apiKey}`;
    const done = this.track(replica);
    try {
      const response = await replica.pool.request({ ...options, headers, path: replica.basePath + options.path });
      done(response.statusCode >= 500 ? `HTTP ${response.statusCode}` : null);
      return response;
    } catch (error) {
      done((error as Error).message, error);
      throw error;
    }
  }

  /** Counts a request that does not go through `dispatch` (passthrough); call the result once it ended. */
  track(replica: Replica): (failure: string | null, error?: unknown) => void {
    replica.requests++;
    replica.inFlight++;
    let ended = false;
    return (failure, error) => {
      if (ended) return;
      ended = true;
      replica.inFlight--;
      if (failure === null) replica.succeeded();
      else replica.failed(isConnectFailure(error) ? "connect" : "answer", failure);
    };
  }

  async #checkHealth(): Promise<void> {
    // With one replica there is nowhere else to send a call: no checks (a lone upstream behaves as it always did).
    if (this.#replicas.length < 2 || this.#closed || this.#checking) return;
    this.#checking = true;
    const timeoutMs = Math.min(5_000, Math.max(1_000, this.#healthIntervalMs));
    await Promise.all(
      this.#replicas.map(async (replica) => {
        try {
          const response = await replica.pool.request({
            method: "GET",
            path: `${replica.basePath}/health`,
            headers: this.apiKey ? { authorization: `Bearer ${this.apiKey}` } : {},
            signal: AbortSignal.timeout(timeoutMs),
          });
          await response.body.dump();
          const ok = response.statusCode >= 200 && response.statusCode < 300;
          replica.checked(ok, `GET /health answered HTTP ${response.statusCode}`);
        } catch (error) {
          replica.checked(false, `GET /health: ${(error as Error).message}`);
        }
      }),
    ).finally(() => (this.#checking = false));
  }

  async close(): Promise<void> {
    this.#closed = true;
    if (this.#healthTimer) clearInterval(this.#healthTimer);
    this.#fileWatch?.close();
    await Promise.all(this.#replicas.map((r) => r.close()));
  }
}
