// The gateway's side of a weight update (design.md, "Weights change under running rollouts"): whoever drives training
// pauses the upstreams through the gateway, updates the weights by its own means and resumes with the new version.
// While paused, harness calls that arrive are held (not failed) until the resume; answers the upstream aborted wait
// here too before they are continued (continued-completion.ts). Every operation is idempotent — a caller that crashed
// and repeats its pause or resume gets the same state — and a pause that nobody resumes ends at its timeout.
import type { Logger } from "../../util/log.ts";
import type { PolicyMetrics } from "./metrics.ts";

export type PauseMode = "abort" | "wait" | "keep";
export const PAUSE_MODES: readonly PauseMode[] = ["abort", "wait", "keep"];

/** A pause nobody resumes ends after this long (the caller crashed between pause and resume). */
export const DEFAULT_PAUSE_TIMEOUT_MS = 300_000;

export interface PolicyState {
  paused: boolean;
  /** The mode of the pause in force, or of the last one. */
  mode: PauseMode | null;
  /** The policy version the upstreams serve, as the last resume named it (null: none named yet). */
  version: string | null;
  /** Pauses since the gateway started. */
  pauses: number;
  /** Epoch ms the pause in force began, and when it ends by itself. */
  pausedAt: number | null;
  resumesAt: number | null;
  /** Calls held now. */
  holding: number;
}

/** What the upstream replicas are told (upstream-pause.ts); a rejection fails the pause or resume. */
export interface UpstreamPauser {
  pause(mode: PauseMode): Promise<void>;
  resume(version: string | null): Promise<void>;
}

export class PolicyGate {
  readonly metrics: PolicyMetrics;
  readonly #log: Logger;
  #upstream: UpstreamPauser;
  #state: PolicyState = {
    paused: false,
    mode: null,
    version: null,
    pauses: 0,
    pausedAt: null,
    resumesAt: null,
    holding: 0,
  };
  #resumed: Promise<void> = Promise.resolve();
  #release: () => void = () => {};
  #timer: NodeJS.Timeout | null = null;
  /**
   * Told of each state this gateway reached by its own pause or resume: with `serve --workers N` the primary relays
   * it to the other workers (gateway/cluster), which `apply` it, so a call held on any worker is held on all.
   */
  onChange: ((state: PolicyState) => void) | null = null;
  // Pause and resume run one at a time: a resume that arrives while the upstreams are being paused follows it.
  #queue: Promise<unknown> = Promise.resolve();

  constructor(upstream: UpstreamPauser, metrics: PolicyMetrics, log: Logger) {
    this.#upstream = upstream;
    this.metrics = metrics;
    this.#log = log;
  }

  get state(): Readonly<PolicyState> {
    return { ...this.#state };
  }

  get paused(): boolean {
    return this.#state.paused;
  }

  /** The version a call sent now is served by (null: none named through the gateway). */
  get version(): string | null {
    return this.#state.version;
  }

  /**
   * Resolves when a new call may go upstream: at once unless paused, else at the resume; with how long it was held
   * (ms, 0 when not). `counted`: a harness call (counted as held), not an interrupted answer waiting to continue.
   */
  async hold(counted = true): Promise<number> {
    if (!this.#state.paused) return 0;
    const start = performance.now();
    if (counted) {
      this.metrics.held.inc();
      this.metrics.holding.inc();
      this.#state.holding++;
    }
    try {
      // A resume that releases callers may be followed at once by the next pause: wait until one finds it running.
      while (this.#state.paused) await this.#resumed;
    } finally {
      if (counted) {
        this.metrics.holding.dec();
        this.#state.holding--;
      }
    }
    const ms = performance.now() - start;
    this.metrics.holdSeconds.observe(ms / 1000);
    return ms;
  }

  /** Pauses every replica in `mode`; calls arriving from now on are held. Repeating it while paused renews its timeout. */
  pause(mode: PauseMode, timeoutMs = DEFAULT_PAUSE_TIMEOUT_MS): Promise<PolicyState> {
    return this.#serial(async () => {
      const s = this.#state;
      if (!s.paused) {
        s.paused = true;
        s.mode = mode;
        s.pauses++;
        s.pausedAt = Date.now();
        this.#resumed = new Promise((resolve) => (this.#release = resolve));
        this.metrics.pauses.inc({ mode });
        this.metrics.paused.set(1);
      }
      this.#arm(timeoutMs);
      this.onChange?.(this.state);
      try {
        // Repeated too when already paused: a replica added since, or one whose pause was lost, is paused now.
        await this.#upstream.pause(s.mode ?? mode);
      } catch (error) {
        // Nothing is held on a pause the upstreams refused: it is undone, and the caller learns why.
        await this.#end(null, false);
        throw error;
      }
      return this.state;
    });
  }

  /** Resumes every replica (telling it `version` where the server keeps one) and releases the held calls. */
  resume(version: string | null): Promise<PolicyState> {
    return this.#serial(() => this.#end(version, false));
  }

  async #end(version: string | null, timedOut: boolean): Promise<PolicyState> {
    const s = this.#state;
    if (version !== null) s.version = version;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    // Resumed upstream even when the gateway was not paused: a caller repeating its resume after a crash of the
    // gateway (whose pause state went with it) still finds the servers generating.
    try {
      await this.#upstream.resume(version);
    } finally {
      if (s.paused) {
        if (timedOut) {
          this.metrics.autoResumes.inc();
          this.#log.warn({ pausedAt: s.pausedAt }, "weight-update pause timed out: resumed without a new version");
        }
        s.paused = false;
        s.pausedAt = null;
        s.resumesAt = null;
        this.metrics.paused.set(0);
        this.#release();
      }
      this.onChange?.(this.state);
    }
    return this.state;
  }

  /**
   * Adopts the state another worker reached (its pause or resume): held calls follow it here, without telling the
   * upstreams again. Each worker keeps the pause's timeout, so a pause whose worker died still ends.
   */
  apply(remote: Readonly<PolicyState>): void {
    const s = this.#state;
    s.version = remote.version;
    s.mode = remote.mode;
    s.pauses = Math.max(s.pauses, remote.pauses);
    if (remote.paused) {
      if (!s.paused) {
        s.paused = true;
        this.#resumed = new Promise((resolve) => (this.#release = resolve));
        this.metrics.paused.set(1);
      }
      s.pausedAt = remote.pausedAt;
      if (remote.resumesAt !== null) this.#arm(Math.max(0, remote.resumesAt - Date.now()));
      return;
    }
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    if (!s.paused) return;
    s.paused = false;
    s.pausedAt = null;
    s.resumesAt = null;
    this.metrics.paused.set(0);
    this.#release();
  }

  #arm(timeoutMs: number): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#state.resumesAt = Date.now() + timeoutMs;
    this.#timer = setTimeout(() => {
      this.#timer = null;
      void this.#serial(() => this.#end(null, true)).catch((error: unknown) =>
        this.#log.error({ err: error }, "resuming the upstreams at the pause's timeout failed"),
      );
    }, timeoutMs);
    this.#timer.unref();
  }

  #serial<T>(work: () => Promise<T>): Promise<T> {
    const next = this.#queue.then(work, work);
    this.#queue = next.catch(() => {});
    return next;
  }

  close(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    if (this.#state.paused) {
      this.#state.paused = false;
      this.#release();
    }
  }
}
