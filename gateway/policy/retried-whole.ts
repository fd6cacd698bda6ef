// A whole (not streamed) answer the upstream aborted for a weight update, asked again after the resume. The harness
// has received nothing of it yet, so the aborted part is discarded and the answer it gets is the new weights' whole
// answer: its ids are exactly what was sampled, all by the version the resume named. (Streamed token-prompt answers
// are continued instead, continued-completion.ts: their harness already read the first part.)
import type { Sink, UpstreamAnswer, UpstreamHeaders } from "../upstream/upstream-call.ts";
import { UpstreamCall } from "../upstream/upstream-call.ts";
import type { PolicyUpdateRecord } from "../../store/records.ts";
import type { PolicyGate } from "./gate.ts";
import type { PolicyMetrics } from "./metrics.ts";
import { MAX_CONTINUATIONS } from "./continued-completion.ts";

export interface RetrySettings {
  /** Sends the same request again through `call`; resolves once the head arrived. */
  reopen: (call: UpstreamCall) => Promise<UpstreamCall>;
  policy: PolicyGate;
  metrics: PolicyMetrics;
  record: PolicyUpdateRecord;
}

/** Whether a whole answer's text says the upstream aborted it (any choice finished with "abort"). */
export function abortedAnswer(raw: Buffer): boolean {
  // Most answers are not: a byte search first, the parse only where it may be.
  if (raw.indexOf('"abort"') < 0) return false;
  try {
    const answer = JSON.parse(raw.toString("utf8")) as { choices?: Array<{ finish_reason?: unknown }> };
    return Array.isArray(answer.choices) && answer.choices.some((c) => c?.finish_reason === "abort");
  } catch {
    return false;
  }
}

export class RetriedWhole implements UpstreamAnswer {
  readonly #settings: RetrySettings;
  #current: UpstreamCall;
  #aborted = false;

  constructor(first: UpstreamCall, settings: RetrySettings) {
    this.#current = first;
    this.#settings = settings;
  }

  get statusCode(): number {
    return this.#current.statusCode;
  }

  get headers(): UpstreamHeaders {
    return this.#current.headers;
  }

  async readAll(): Promise<Buffer> {
    const { policy, record } = this.#settings;
    for (let attempt = 0; ; attempt++) {
      const raw = await this.#current.readAll();
      if (this.statusCode !== 200 || !abortedAnswer(raw) || this.#aborted || attempt >= MAX_CONTINUATIONS) return raw;
      await policy.hold(false);
      if (this.#aborted) return raw;
      record.continued = (record.continued ?? 0) + 1;
      this.#settings.metrics.continued.inc();
      // Every token of the answer the harness gets is sampled by the version served now.
      record.versions = [{ start: 0, version: policy.version }];
      const next = new UpstreamCall();
      this.#current = next;
      await this.#settings.reopen(next);
    }
  }

  /** Whole answers are read with readAll; a relay that pumps one gets the bytes at once. */
  async pump(sink: Sink): Promise<void> {
    sink(await this.readAll());
  }

  resume(): void {
    this.#current.resume();
  }

  abort(): void {
    this.#aborted = true;
    this.#current.abort();
  }
}
