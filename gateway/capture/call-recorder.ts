// Follows one harness call from arrival to its committed record: timings, rlgate's own overhead, and exactly one
// final record (a call ends once: ok, upstream_error, client_aborted or timeout).
import type {
  ApiSurface,
  CallRecord,
  CallStatus,
  ChoiceCapture,
  HistoryRepair,
  PolicyUpdateRecord,
  PromptRecord,
  SamplingParams,
  TokenSource,
} from "../../store/records.ts";
import type { Store } from "../../store/store.ts";
import type { GatewayMetrics } from "../metrics.ts";
import {
  captureRouting,
  type RoutedExpertsSetting,
  type RoutedPayload,
  type RoutingAsk,
} from "../upstream/routed-experts.ts";

export interface CallStart {
  rolloutId: string | null;
  api: ApiSurface;
  path: string;
  stream: boolean;
  model: string | null;
  requestReceived: unknown;
  requestForwarded: unknown;
  /** Tools the forwarded chat request offered (unset for completions). */
  tools?: number;
  /** Assistant turns history repair put back (unset or empty: none). */
  repairs?: HistoryRepair[];
  /** The policy version serving the call (header, else the rollout's); null when none was given. */
  policyVersion?: string | null;
  /** Sampling parameters of the forwarded request. */
  sampling?: SamplingParams | null;
  warnings?: string[];
  maxTokensCap?: CallRecord["maxTokensCap"];
  /** Filled in while the call runs when a weight update meets it (gateway/policy); kept when not empty. */
  policyUpdate?: PolicyUpdateRecord;
  /** Epoch ms and performance.now() when the request head arrived. */
  startEpoch: number;
  startPerf: number;
  /** How the prompt was made (set by the token prompt mode); more may be added before the call finishes. */
  prompt?: PromptRecord;
  /** What the upstream's ids and choices are checked against (unchecked when absent). */
  limits?: TokenLimits;
  /** `serve --routed-experts`: what was asked of the upstream and how its payloads are read. */
  routing?: { ask: RoutingAsk; setting: RoutedExpertsSetting };
}

export interface TokenLimits {
  /** Ids run from 0 to vocabSize − 1. */
  vocabSize: number;
  /** Choices the request asked for: their indexes run from 0 to choices − 1. */
  choices: number;
}

/** The first id that is not an integer in [0, vocabSize), as text; null when all are. */
function badId(ids: readonly number[], vocabSize: number): string | null {
  for (const id of ids) if (!Number.isInteger(id) || id < 0 || id >= vocabSize) return String(id);
  return null;
}

/** Ids or choice indexes an upstream could not have produced: never wrapped into int32, never trusted. */
function outOfRange(outcome: Pick<CallOutcome, "promptTokenIds" | "choices">, limits: TokenLimits): string | null {
  const prompt = outcome.promptTokenIds === null ? null : badId(outcome.promptTokenIds, limits.vocabSize);
  if (prompt !== null) return `prompt token id ${prompt} is outside the vocabulary (0 to ${limits.vocabSize - 1})`;
  const seen = new Set<number>();
  for (const choice of outcome.choices) {
    if (
      !Number.isInteger(choice.index) ||
      choice.index < 0 ||
      choice.index >= limits.choices ||
      seen.has(choice.index)
    ) {
      return `choice index ${choice.index} is not one of the ${limits.choices} choice(s) requested, or repeats`;
    }
    seen.add(choice.index);
    const sampled = badId(choice.tokenIds, limits.vocabSize);
    if (sampled !== null)
      return `choice ${choice.index}: token id ${sampled} is outside the vocabulary (0 to ${limits.vocabSize - 1})`;
  }
  return null;
}

export interface CallOutcome {
  status: CallStatus;
  httpStatus: number | null;
  error?: string | null;
  response: unknown;
  promptTokenIds: number[] | null;
  choices: ChoiceCapture[];
  /** For translated calls: the upstream's chat response (plain JSON), kept beside the translated `response`. */
  upstreamResponse?: unknown;
  /** The upstream's usage block, to check the ids against its counts. */
  usage?: { prompt_tokens?: unknown; completion_tokens?: unknown } | null;
  /** Routed-experts payloads of the response (kept on the choices when routing was asked for). */
  routedExperts?: RoutedPayload[];
}

export interface TokenVerdict {
  source: TokenSource;
  issue: string | null;
}

function missing(issue: string): TokenVerdict {
  return { source: "missing", issue };
}

/**
 * Where the ids came from, and whether they can be trusted. Ids that disagree with the upstream's own counts (usage,
 * one logprob per token) are never silently trained on: e.g. vLLM 0.10.2 streams no ids for tokens without text.
 */
export function judgeTokens(
  outcome: Pick<CallOutcome, "promptTokenIds" | "choices" | "status" | "usage">,
  limits?: TokenLimits,
): TokenVerdict {
  const impossible = limits ? outOfRange(outcome, limits) : null;
  if (impossible !== null) return missing(impossible);
  if (outcome.promptTokenIds === null || outcome.promptTokenIds.length === 0) {
    return missing("the upstream reported no prompt token ids");
  }
  if (outcome.status === "ok" && outcome.choices.length === 0) return missing("the upstream reported no choices");
  let sampled = 0;
  for (const choice of outcome.choices) {
    sampled += choice.tokenIds.length;
    // A choice that finished normally but carries no ids means the upstream did not report them.
    if (choice.tokenIds.length === 0 && choice.finishReason !== null) {
      return missing(`choice ${choice.index} finished without sampled token ids`);
    }
    if (choice.logprobs !== null && choice.logprobs.length !== choice.tokenIds.length) {
      return missing(
        `choice ${choice.index}: ${choice.tokenIds.length} token ids but ${choice.logprobs.length} logprobs`,
      );
    }
  }
  const usage = outcome.usage;
  if (outcome.status === "ok" && usage) {
    if (typeof usage.prompt_tokens === "number" && usage.prompt_tokens !== outcome.promptTokenIds.length) {
      return missing(
        `${outcome.promptTokenIds.length} prompt token ids but usage.prompt_tokens is ${usage.prompt_tokens}`,
      );
    }
    if (typeof usage.completion_tokens === "number" && usage.completion_tokens !== sampled) {
      return missing(`${sampled} sampled token ids but usage.completion_tokens is ${usage.completion_tokens}`);
    }
  }
  return { source: "upstream", issue: null };
}

export class CallRecorder {
  readonly seq: number;
  readonly #store: Store;
  readonly #metrics: GatewayMetrics;
  readonly #start: CallStart;
  #upstreamStart: number | null = null;
  #firstByte: number | null = null;
  #firstToken: number | null = null;
  #replica: string | null = null;
  #replicaWarnings: string[] = [];
  #overheadMs = 0;
  #segmentStart: number;
  #committed: Promise<void> | null = null;
  #status: CallStatus | null = null;

  readonly #onRecord: ((record: CallRecord) => void) | null;

  /** `onRecord` sees each record as it is committed (history repair learns the turns the model sampled). */
  constructor(
    store: Store,
    metrics: GatewayMetrics,
    start: CallStart,
    onRecord: ((record: CallRecord) => void) | null = null,
  ) {
    this.#onRecord = onRecord;
    this.#store = store;
    this.#metrics = metrics;
    this.#start = start;
    this.seq = store.nextCallSeq();
    this.#segmentStart = performance.now();
  }

  get finished(): boolean {
    return this.#committed !== null;
  }

  /** The status the call was recorded with; null until it finished. */
  get status(): CallStatus | null {
    return this.#status;
  }

  /** Adds to the call's prompt record before it is committed (the answer's continuation keys). */
  notePrompt(fields: Partial<PromptRecord>): void {
    if (this.#start.prompt) Object.assign(this.#start.prompt, fields);
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

  /** The replica the call went to; again, with the failure, when a refused connection sent it to another one. */
  servedBy(replica: string, retriedAfter: Error | null): void {
    if (retriedAfter && this.#replica !== null)
      this.#replicaWarnings.push(
        `replica ${this.#replica} refused the connection (${retriedAfter.message}); sent to ${replica}`,
      );
    this.#replica = replica;
  }

  /** Builds and commits the record. Idempotent: only the first outcome counts. */
  finish(outcome: CallOutcome): Promise<void> {
    if (this.#committed) return this.#committed;
    const verdict = judgeTokens(outcome, this.#start.limits);
    this.#status = outcome.status;
    const routing = this.#start.routing;
    const routingIssue =
      routing && outcome.status === "ok" && verdict.source === "upstream"
        ? captureRouting(
            outcome.routedExperts ?? [],
            outcome.promptTokenIds,
            outcome.choices,
            routing.ask,
            routing.setting,
          )
        : null;
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
      ...(outcome.upstreamResponse === undefined ? {} : { upstreamResponse: outcome.upstreamResponse }),
      promptTokenIds: outcome.promptTokenIds,
      choices: outcome.choices,
      ...(this.#start.warnings?.length || this.#replicaWarnings.length
        ? { warnings: [...(this.#start.warnings ?? []), ...this.#replicaWarnings] }
        : {}),
      ...(this.#start.maxTokensCap ? { maxTokensCap: this.#start.maxTokensCap } : {}),
      tokenSource: verdict.source,
      tokenIssue: verdict.issue,
      ...(routingIssue === null ? {} : { routingIssue }),
      policyVersion: this.#start.policyVersion ?? null,
      ...(this.#start.policyUpdate && Object.keys(this.#start.policyUpdate).length
        ? { policyUpdate: this.#start.policyUpdate }
        : {}),
      sampling: this.#start.sampling ?? null,
      timings: {
        start: this.#start.startEpoch,
        upstreamStart: this.#upstreamStart,
        firstByte: this.#firstByte,
        firstToken: this.#firstToken,
        end: Date.now(),
        overheadMs: Math.round(this.#overheadMs * 1000) / 1000,
      },
      ...(this.#start.tools === undefined ? {} : { tools: this.#start.tools }),
      ...(this.#start.repairs?.length ? { repairs: this.#start.repairs } : {}),
      ...(this.#start.prompt ? { prompt: this.#start.prompt } : {}),
      ...(this.#replica === null ? {} : { replica: this.#replica }),
    };
    this.#metrics.recordCall(record);
    this.#committed = this.#store.putCall(record);
    this.#onRecord?.(record);
    return this.#committed;
  }
}
