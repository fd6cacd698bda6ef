// A trainer's weight update through the core (trainer.proto PausePolicy / ResumePolicy): relayed to the control API
// of every gateway the core was given (`rlgate core --gateway-api`), POST /api/policy/pause and /resume with the
// gateways' token, which are idempotent there; a resume's version becomes the core's current version (staleness,
// policy-version.ts) once every gateway took it.
// A pause is all or nothing: one that a gateway refuses (or does not answer) is undone at every gateway, so a trainer
// never updates weights under a fleet that is only partly paused, nor is one left paused by an update that failed.
import {
  LinkError,
  type GatewayPolicy,
  type PausePolicyRequest,
  type PolicyState,
  type ResumePolicyRequest,
} from "../../protocol/index.ts";
import type { CurrentVersion } from "./policy-version.ts";

const PAUSE_MODES = ["abort", "wait", "keep"] as const;
/**
 * How long a gateway may take to answer: a wait-mode pause answers once the running answers ended, which its pause
 * outlives by no more than its timeout (the gateway's default 300 s unless asked); a resume is quick, but waits
 * behind a pause the gateway is still taking. Bounded, because relayed operations wait for each other.
 */
const DEFAULT_PAUSE_TIMEOUT_S = 300;
const ANSWER_SLACK_MS = 30_000;
/** The longest version a gateway takes (gateway/policy/control.ts): one it would refuse is refused here first. */
const MAX_VERSION_CHARS = 128;

interface GatewayAnswer {
  paused?: boolean;
  mode?: string | null;
  version?: string | null;
  pauses?: number;
  holding?: number;
}

export interface PolicyRelayOptions {
  /** The gateways' control API base URLs (http://host:port). */
  gatewayApis: readonly string[];
  /** Their control token (`rlgate serve --token`). */
  token: string | null;
  current: CurrentVersion;
}

export class PolicyRelay {
  readonly #options: PolicyRelayOptions;
  // Pauses and resumes are relayed one at a time, as each gateway runs them: a trainer that repeats a pause while its
  // first is still out (a deadline it gave up on) gets the repeat after the first ended, so the first one's undo
  // cannot resume what the repeat paused.
  #queue: Promise<unknown> = Promise.resolve();

  constructor(options: PolicyRelayOptions) {
    this.#options = { ...options, gatewayApis: options.gatewayApis.map((u) => u.replace(/\/+$/, "")) };
  }

  async pause(request: PausePolicyRequest): Promise<PolicyState> {
    const mode = request.mode || "abort";
    if (!(PAUSE_MODES as readonly string[]).includes(mode))
      throw new LinkError("RLGATE_BAD_REQUEST", `mode must be one of ${PAUSE_MODES.join(", ")}, not '${mode}'`);
    if (!(Number.isFinite(request.timeoutS) && request.timeoutS >= 0))
      throw new LinkError("RLGATE_BAD_REQUEST", `timeout_s must be a number of seconds >= 0, not ${request.timeoutS}`);
    const urls = this.#options.gatewayApis;
    if (!urls.length)
      throw new LinkError(
        "RLGATE_BAD_REQUEST",
        "this core relays pauses to no gateway: start it with --gateway-api http://HOST:PORT (each gateway's control API)",
      );
    const body = request.timeoutS > 0 ? { mode, timeout_s: request.timeoutS } : { mode };
    const deadlineMs = (request.timeoutS || DEFAULT_PAUSE_TIMEOUT_S) * 1000 + ANSWER_SLACK_MS;
    return this.#serial(() => this.#pause(urls, body, deadlineMs));
  }

  async #pause(urls: readonly string[], body: object, deadlineMs: number): Promise<PolicyState> {
    const results = await Promise.allSettled(urls.map((url) => this.#post(url, "pause", body, deadlineMs)));
    const failed = results.flatMap((r, i) => (r.status === "rejected" ? [`${urls[i]}: ${reason(r.reason)}`] : []));
    if (failed.length) {
      // Undone everywhere (a resume without a version, idempotent), so no gateway stays paused by a failed update: at
      // a gateway that failed too, for a failure may have come after it paused (its answer lost on the way).
      await Promise.allSettled(urls.map((url) => this.#post(url, "resume", {})));
      throw new LinkError("RLGATE_UNAVAILABLE", `the pause was refused and undone: ${failed.join("; ")}`);
    }
    return this.#state(
      results.map((r, i) => gatewayPolicy(urls[i]!, (r as PromiseFulfilledResult<GatewayAnswer>).value)),
    );
  }

  resume(request: ResumePolicyRequest): Promise<PolicyState> {
    return this.#serial(() => this.#resume(request.version));
  }

  async #resume(version: string): Promise<PolicyState> {
    // Checked before any gateway is asked, as each gateway checks it: a version they would all refuse is not current.
    if (version.length > MAX_VERSION_CHARS)
      throw new LinkError("RLGATE_BAD_REQUEST", `version is at most ${MAX_VERSION_CHARS} characters`);
    const urls = this.#options.gatewayApis;
    const results = await Promise.allSettled(urls.map((url) => this.#post(url, "resume", version ? { version } : {})));
    const failed = results.flatMap((r, i) => (r.status === "rejected" ? [`${urls[i]}: ${reason(r.reason)}`] : []));
    // Current only once every gateway serves it (a resume that failed anywhere is repeated by the trainer).
    if (failed.length) throw new LinkError("RLGATE_UNAVAILABLE", `the resume failed (repeat it): ${failed.join("; ")}`);
    if (version) this.#options.current.resume(version);
    return this.#state(
      results.map((r, i) => gatewayPolicy(urls[i]!, (r as PromiseFulfilledResult<GatewayAnswer>).value)),
    );
  }

  /** Settles once every pause and resume asked so far has ended (the core waits for it before it closes). */
  async idle(): Promise<void> {
    await this.#queue;
  }

  #serial<T>(run: () => Promise<T>): Promise<T> {
    const next = this.#queue.then(run, run);
    this.#queue = next.catch(() => {});
    return next;
  }

  #state(gateways: GatewayPolicy[]): PolicyState {
    return {
      paused: gateways.length > 0 && gateways.every((g) => g.paused),
      currentVersion: this.#options.current.version,
      gateways,
    };
  }

  async #post(
    url: string,
    action: "pause" | "resume",
    body: object,
    deadlineMs = DEFAULT_PAUSE_TIMEOUT_S * 1000 + ANSWER_SLACK_MS,
  ): Promise<GatewayAnswer> {
    const token = this.#options.token;
    const res = await fetch(`${url}/api/policy/${action}`, {
      method: "POST",
      headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(deadlineMs),
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`HTTP ${res.status} ${text.slice(0, 500)}`);
    return JSON.parse(text) as GatewayAnswer;
  }
}

function reason(error: unknown): string {
  const e = error as Error & { cause?: Error };
  return e.cause?.message ? `${e.message} (${e.cause.message})` : (e.message ?? String(error));
}

function gatewayPolicy(url: string, a: GatewayAnswer): GatewayPolicy {
  return {
    url,
    paused: a.paused === true,
    mode: a.mode ?? "",
    version: a.version ?? "",
    pauses: a.pauses ?? 0,
    holding: a.holding ?? 0,
  };
}
