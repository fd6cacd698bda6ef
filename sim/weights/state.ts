// The sim's weights and their updates: a policy version, a paused flag, and the generations that run meanwhile. It is
// what vLLM's `POST /pause` / `POST /resume` and SGLang's `pause_generation` / `continue_generation` /
// `update_weight_version` act on (sim/weights/routes.ts). While paused no generation starts (vLLM and SGLang block new
// requests until resumed); in-flight streams are aborted (abort), frozen at a step boundary (keep, SGLang's in_place
// and retract), or run to their end before the pause answers (wait). Logprobs are reported with a seed that depends on
// the version, so an update changes what the policy scores; sampling keeps the server's seed (a fixed request seed
// samples the same ids under every version, which is what makes a continued answer comparable to an uninterrupted one).
import { fnvString, mix } from "../hash.ts";

export type PauseMode = "abort" | "wait" | "keep";

/** What happened to the weights, in order: tests read where the version changed under each generation. */
export type WeightsEvent =
  | { event: "pause"; mode: PauseMode; version: string }
  | { event: "resume"; version: string }
  /** A stream aborted by a pause: `steps` engine steps (the role chunk, then a token each) had been written. */
  | { event: "abort"; request: number; steps: number; version: string }
  /** A stream frozen by a keep-mode pause after `steps` steps, resumed under `version`. */
  | { event: "kept"; request: number; steps: number; version: string };

/** One running stream's view of the weights: whether to go on, wait, or end with an abort. */
export interface StreamGate {
  /** Settles when the stream must stop waiting for its next step (an abort-mode pause). */
  readonly interrupted: Promise<void>;
  /** Whether `next` has anything to say (a pause holds or aborted this stream); false: write the next step at once. */
  readonly held: boolean;
  /** Before writing step `steps`: "go", or "abort" (end with an abort chunk). Waits while paused in keep mode. */
  next(steps: number, closed: Promise<void>): Promise<"go" | "abort">;
  done(): void;
}

export const INITIAL_VERSION = "0";

/** The seed logprobs are reported with under `version` (a test recomputes them with simLogprob). */
export function versionLogprobSeed(seed: number, version: string): number {
  return version === INITIAL_VERSION ? seed : mix(seed, fnvString(`weights:${version}`));
}

export class SimWeights {
  version = INITIAL_VERSION;
  paused = false;
  mode: PauseMode = "abort";
  readonly log: WeightsEvent[] = [];
  readonly #seed: number;
  readonly #streams = new Set<{ abort: () => void }>();
  #wholeInFlight = 0;
  /** Whole generations an abort-mode pause ends (streams are in #streams). */
  readonly #aborting = new Set<{ abort: () => void }>();
  #resumed: { promise: Promise<void>; resolve: () => void } = settled();
  #drained: (() => void) | null = null;

  constructor(seed: number) {
    this.#seed = seed;
  }

  /** The logprob seed of the current version (undefined at the initial one: logprobs as before any update). */
  get logprobSeed(): number | undefined {
    return this.version === INITIAL_VERSION ? undefined : versionLogprobSeed(this.#seed, this.version);
  }

  /** Generations running now (streams and whole answers). */
  get running(): number {
    return this.#streams.size + this.#wholeInFlight;
  }

  /** Pauses generation; resolves when the pause holds (in wait mode: once in-flight generations ended). */
  async pause(mode: PauseMode): Promise<void> {
    if (!this.paused) {
      this.paused = true;
      this.mode = mode;
      this.#resumed = pending();
      this.log.push({ event: "pause", mode, version: this.version });
      if (mode === "abort") for (const running of [...this.#streams, ...this.#aborting]) running.abort();
    }
    if (mode === "wait") await this.#drain();
  }

  resume(): void {
    if (!this.paused) return;
    this.paused = false;
    this.log.push({ event: "resume", version: this.version });
    this.#resumed.resolve();
  }

  setVersion(version: string): void {
    this.version = version;
  }

  /** Resolves once generation may start (at once unless paused), or when the client left. */
  runnable(closed: Promise<void>): Promise<void> {
    return this.paused ? Promise.race([this.#resumed.promise, closed]) : Promise.resolve();
  }

  /**
   * A whole (not streamed) generation runs until `end()`: a wait-mode pause waits for it, an abort-mode one ends it
   * (`interrupted` settles, `aborted` turns true: the server answers it as aborted).
   */
  whole(): { interrupted: Promise<void>; readonly aborted: boolean; end: () => void } {
    this.#wholeInFlight++;
    let ended = false;
    let aborted = false;
    let abort!: () => void;
    const interrupted = new Promise<void>((resolve) => (abort = resolve));
    const entry = {
      abort: () => {
        aborted = true;
        abort();
      },
    };
    this.#aborting.add(entry);
    return {
      interrupted,
      get aborted() {
        return aborted;
      },
      end: () => {
        if (ended) return;
        ended = true;
        this.#aborting.delete(entry);
        this.#wholeInFlight--;
        this.#checkDrained();
      },
    };
  }

  stream(request: number): StreamGate {
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- the gate's getter reads the weights' flag
    const weights = this;
    let abort!: () => void;
    const interrupted = new Promise<void>((resolve) => (abort = resolve));
    let aborted = false;
    const entry = {
      abort: () => {
        aborted = true;
        abort();
      },
    };
    this.#streams.add(entry);
    return {
      interrupted,
      get held() {
        return aborted || (weights.paused && weights.mode === "keep");
      },
      next: async (steps, closed) => {
        if (aborted) {
          this.log.push({ event: "abort", request, steps, version: this.version });
          return "abort";
        }
        // Wait mode lets running streams end; keep mode freezes them until the resume.
        if (!this.paused || this.mode !== "keep") return "go";
        await Promise.race([this.#resumed.promise, closed]);
        this.log.push({ event: "kept", request, steps, version: this.version });
        return "go";
      },
      done: () => {
        this.#streams.delete(entry);
        this.#checkDrained();
      },
    };
  }

  #drain(): Promise<void> {
    if (this.#streams.size + this.#wholeInFlight === 0) return Promise.resolve();
    return new Promise((resolve) => (this.#drained = resolve));
  }

  #checkDrained(): void {
    if (this.#drained && this.#streams.size + this.#wholeInFlight === 0) {
      const resolve = this.#drained;
      this.#drained = null;
      resolve();
    }
  }
}

function pending(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

function settled(): { promise: Promise<void>; resolve: () => void } {
  return { promise: Promise.resolve(), resolve: () => {} };
}

/**
 * The event that ends a stream aborted by a pause, as vLLM and SGLang send it: the request's finish reason is
 * "abort", with no further text. Its id, object and model are those of the stream's first chunk.
 */
export function abortChunk(first: string | undefined): string {
  let head: Record<string, unknown> = {};
  try {
    head = JSON.parse(first ?? "{}") as Record<string, unknown>;
  } catch {
    // A stream whose first payload is not JSON has no head to copy.
  }
  const chat = head["object"] === "chat.completion.chunk";
  const choice = chat
    ? { index: 0, delta: {}, logprobs: null, finish_reason: "abort", stop_reason: null }
    : { index: 0, text: "", logprobs: null, finish_reason: "abort", stop_reason: null };
  return JSON.stringify({
    id: head["id"],
    object: head["object"],
    created: head["created"],
    model: head["model"],
    choices: [choice],
  });
}

/**
 * A whole answer aborted by a pause, as the servers return it: every choice finished with "abort". The sim cuts it
 * before its first token (real servers return what was sampled by then; the gateway discards it either way).
 */
export function abortedWhole(body: unknown): unknown {
  if (typeof body !== "object" || body === null) return body;
  const answer = body as Record<string, unknown>;
  const choices = Array.isArray(answer["choices"]) ? (answer["choices"] as Record<string, unknown>[]) : [];
  return {
    ...answer,
    choices: choices.map((choice) => {
      const cut: Record<string, unknown> = { ...choice, finish_reason: "abort", logprobs: null };
      if ("token_ids" in choice) cut["token_ids"] = [];
      if ("text" in choice) cut["text"] = "";
      const message = choice["message"];
      if (typeof message === "object" && message !== null)
        cut["message"] = { role: "assistant", content: "", tool_calls: [] };
      return cut;
    }),
    ...(typeof answer["usage"] === "object" && answer["usage"] !== null
      ? { usage: { ...(answer["usage"] as object), completion_tokens: 0 } }
      : {}),
  };
}
