// One inference server behind the gateway: its keep-alive connection pool, what it is doing (in flight, requests,
// errors) and whether calls may go to it. Ejection is passive (a refused connection at once, a streak of 5xx answers
// or failed bodies) or active (failed health checks); an ejected replica returns once it passes health checks again.
import { Pool } from "undici";

export interface ReplicaSettings {
  connections: number;
  headersTimeoutMs: number;
  bodyTimeoutMs: number;
}

/** Consecutive 5xx answers, failed bodies or timeouts that eject a replica. */
export const FAILURE_STREAK_TO_EJECT = 5;
/** Consecutive failed health checks that eject a replica, and passed ones that bring an ejected replica back. */
export const HEALTH_CHECKS_TO_FLIP = 2;

export type FailureKind = "connect" | "answer";

/** Told when a replica is ejected (with why) or returns. */
export type ReplicaStateListener = (replica: Replica, state: "ejected" | "returned", reason: string) => void;

export class Replica {
  /** The URL as given (the `replica` label and the call record's `replica`). */
  readonly url: string;
  readonly origin: string;
  /** Path prefix of the URL (e.g. "" or "/sglang"), prepended to forwarded paths. */
  readonly basePath: string;
  readonly pool: Pool;
  inFlight = 0;
  requests = 0;
  errors = 0;
  healthy = true;
  /** Why the replica was ejected (null while healthy). */
  ejectedBecause: string | null = null;
  #failures = 0;
  #checksFailed = 0;
  #checksPassed = 0;
  readonly #onState: ReplicaStateListener;

  constructor(url: string, settings: ReplicaSettings, onState: ReplicaStateListener = () => {}) {
    this.#onState = onState;
    const parsed = new URL(url);
    this.url = url;
    this.origin = parsed.origin;
    this.basePath = parsed.pathname.replace(/\/+$/, "").replace(/\/v1$/, "");
    this.pool = new Pool(this.origin, {
      connections: settings.connections,
      pipelining: 1,
      keepAliveTimeout: 30_000,
      headersTimeout: settings.headersTimeoutMs,
      bodyTimeout: settings.bodyTimeoutMs,
    });
  }

  /** A request answered below 500: the failure streak ends. */
  succeeded(): void {
    this.#failures = 0;
  }

  /** A request failed because of the replica (a refused connection ejects it at once, other failures in a streak). */
  failed(kind: FailureKind, message: string): void {
    this.errors++;
    this.#failures++;
    if (!this.healthy) return;
    if (kind === "connect") this.#eject(`connection failed: ${message}`);
    else if (this.#failures >= FAILURE_STREAK_TO_EJECT)
      this.#eject(`${this.#failures} failed requests in a row, the last: ${message}`);
  }

  /** A health check's result: a streak of failures ejects the replica, a streak of passes brings it back. */
  checked(ok: boolean, message: string): void {
    if (ok) {
      this.#checksFailed = 0;
      this.#checksPassed++;
      if (this.healthy || this.#checksPassed < HEALTH_CHECKS_TO_FLIP) return;
      this.healthy = true;
      this.ejectedBecause = null;
      this.#failures = 0;
      this.#onState(this, "returned", `${this.#checksPassed} health checks passed`);
      return;
    }
    this.#checksPassed = 0;
    this.#checksFailed++;
    if (this.healthy && this.#checksFailed >= HEALTH_CHECKS_TO_FLIP)
      this.#eject(`health check failed ${this.#checksFailed} times in a row: ${message}`);
  }

  #eject(reason: string): void {
    this.healthy = false;
    this.ejectedBecause = reason;
    this.#checksPassed = 0;
    this.#onState(this, "ejected", reason);
  }

  async close(): Promise<void> {
    await this.pool.destroy();
  }
}
