// Follows one harness call from arrival to its committed record: timings, rlgate's own overhead, and exactly one
// final record (a call ends once: ok, upstream_error, client_aborted or timeout).
import type { ApiSurface, CallRecord, CallStatus, ChoiceCapture, TokenSource } from "../../store/records.ts";
import type { Store } from "../../store/store.ts";
import type { GatewayMetrics } from "../metrics.ts";

export interface CallStart {
  rolloutId: string | null;
  api: ApiSurface;
  path: string;
  stream: boolean;
  model: string | null;
  requestReceived: unknown;
  requestForwarded: unknown;
  /** Epoch ms and performance.now() when the request head arrived. */
  startEpoch: number;
  startPerf: number;
}

export interface CallOutcome {
  status: CallStatus;
  httpStatus: number | null;
  error?: string | null;
  response: unknown;
  promptTokenIds: number[] | null;
  choices: ChoiceCapture[];
}

export function tokenSourceOf(outcome: Pick<CallOutcome, "promptTokenIds" | "choices" | "status">): TokenSource {
  if (outcome.promptTokenIds === null || outcome.promptTokenIds.length === 0) return "missing";
  if (outcome.status === "ok" && outcome.choices.length === 0) return "missing";
  for (const choice of outcome.choices) {
    // A choice that finished normally but carries no ids means the upstream did not report them.
    if (choice.tokenIds.length === 0 && choice.finishReason !== null) return "missing";
  }
  return "upstream";
}

export class CallRecorder {
  readonly seq: number;
  readonly #store: Store;
  readonly #metrics: GatewayMetrics;
  readonly #start: CallStart;
  #upstreamStart: number | null = null;
  #firstByte: number | null = null;
  #firstToken: number | null = null;
  #overheadMs = 0;
  #segmentStart: number;
  #committed: Promise<void> | null = null;

  constructor(store: Store, metrics: GatewayMetrics, start: CallStart) {
    this.#store = store;
    this.#metrics = metrics;
    this.#start = start;
    this.seq = store.nextCallSeq();
    this.#segmentStart = performance.now();
  }

  get finished(): boolean {
    return this.#committed !== null;
  }

  /** Starts timing a stretch of rlgate's own work (body parsed, chunk received, ...). */
  beginWork(): void {
    this.#segmentStart = performance.now();
  }

  /** Ends a stretch of rlgate's own work and adds it to the call's overhead. */
  endWork(): number {
    this.#overheadMs += performance.now() - this.#segmentStart;
    return this.#overheadMs;
  }

  get overheadMs(): number {
    return this.#overheadMs;
  }

  markUpstreamStart(): void {
    this.#upstreamStart = Date.now();
  }

  markFirstByte(): void {
    this.#firstByte ??= Date.now();
  }

  markFirstToken(): void {
    this.#firstToken ??= Date.now();
  }

  /** Builds and commits the record. Idempotent: only the first outcome counts. */
  finish(outcome: CallOutcome): Promise<void> {
    if (this.#committed) return this.#committed;
    const record: CallRecord = {
      seq: this.seq,
      rolloutId: this.#start.rolloutId,
      api: this.#start.api,
      path: this.#start.path,
      stream: this.#start.stream,
      model: this.#start.model,
      status: outcome.status,
      httpStatus: outcome.httpStatus,
      error: outcome.error ?? null,
      requestReceived: this.#start.requestReceived,
      requestForwarded: this.#start.requestForwarded,
      response: outcome.response,
      promptTokenIds: outcome.promptTokenIds,
      choices: outcome.choices,
      tokenSource: tokenSourceOf(outcome),
      timings: {
        start: this.#start.startEpoch,
        upstreamStart: this.#upstreamStart,
        firstByte: this.#firstByte,
        firstToken: this.#firstToken,
        end: Date.now(),
        overheadMs: Math.round(this.#overheadMs * 1000) / 1000,
      },
    };
    this.#metrics.recordCall(record);
    this.#committed = this.#store.putCall(record);
    return this.#committed;
  }
}
