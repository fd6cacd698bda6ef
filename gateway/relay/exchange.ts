// One captured call's trip upstream, shared by every API surface: record start, forward with the harness's disconnect
// wired to an abort, read the answer whole or event by event, and record failures the same way everywhere.
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from "node:http";
import {
  RawJson,
  type ApiSurface,
  type CallRecord,
  type ChoiceCapture,
  type PromptRecord,
  type SamplingParams,
} from "../../store/records.ts";
import type { Attribution } from "../attribution.ts";
import { branchForwarded } from "../branching/index.ts";
import { CallRecorder, type CallOutcome, type CallStart, type TokenLimits } from "../capture/call-recorder.ts";
import type { GatewayContext } from "../context.ts";
import { GatewayError, asGatewayError } from "../errors.ts";
import { classifyUpstreamFailure, forward, watchHarnessDisconnect } from "../forward.ts";
import { SseParser, type SseEvent } from "../sse-parser.ts";
import { forwardedPayload } from "./forwarded-payload.ts";
import type { Json } from "../upstream/fields.ts";
import type { ApiCodec } from "../upstream/flavor.ts";
import type { RecentIdLists } from "../upstream/id-list.ts";
import { parseReadingPromptIds } from "../upstream/chat-chunk-scan.ts";
import { UpstreamCall, type UpstreamAnswer } from "../upstream/upstream-call.ts";
import { vocabularySize } from "../upstream/vocabulary.ts";
import { ContinuedCompletion, continuable } from "../policy/continued-completion.ts";
import { RetriedWhole } from "../policy/retried-whole.ts";
import type { PolicyUpdateRecord } from "../../store/records.ts";

/** A harness request as the router hands it to a surface. */
export interface HarnessCall {
  req: IncomingMessage;
  res: ServerResponse;
  attribution: Attribution;
  body: unknown;
  /** The body's bytes as received (recorded as they are). */
  rawBody: Buffer;
  startEpoch: number;
  startPerf: number;
}

export interface ExchangeSpec {
  api: ApiSurface;
  /** The upstream route the call goes to (/v1/chat/completions, /v1/completions). */
  upstreamPath: string;
  /** Whether the harness asked for a stream. */
  stream: boolean;
  /** The model the harness asked for. */
  model: string | null;
  /**
   * The body sent upstream (recorded as `requestForwarded`). Build it as a new object over the harness's body; never
   * edit the harness's body (or objects inside it) in place: fields it shares with the harness's body travel as the
   * harness's own bytes (forwarded-payload.ts).
   */
  forwarded: Json;
  /** Harness headers that belong to its own API and do not travel upstream (e.g. Anthropic's). */
  omitHeader?: (name: string) => boolean;
  /** How the prompt was made (token prompt mode), recorded on the call. */
  prompt?: PromptRecord;
  /**
   * How many tools the harness offered, recorded on the call (segment rules read it: a side call offers none). Read
   * from the forwarded chat request when not given; a token prompt carries its tools inside the prompt ids.
   */
  toolCount?: number;
  /** Reads the upstream's answer as another API (token prompt mode: a completion read as a chat completion). */
  translateAnswer?: (upstream: UpstreamAnswer, recorder: CallRecorder) => UpstreamAnswer;
  /** The codec of the chat answer the relays read (default: the upstream flavour's chat codec). */
  chatCodec?: ApiCodec;
  /** What the translation dropped or changed, recorded on the call. */
  warnings?: string[];
  /** A max_tokens lowered by `--max-tokens-cap`, recorded on the call. */
  maxTokensCap?: CallRecord["maxTokensCap"];
}

const CHAT_PATH = "/v1/chat/completions";
/** Upstream routes whose whole answers an abort-mode weight update can end (asked again after it: gateway/policy). */
const GENERATION_PATHS = new Set([CHAT_PATH, "/v1/completions"]);
export const POLICY_VERSION_HEADER = "x-rlgate-policy-version";

/**
 * The call's policy version: its header (a harness or runner passes it per call), else the version the last resume
 * through the gateway named (gateway/policy), else its rollout's.
 */
function policyVersionOf(ctx: Pick<GatewayContext, "policy" | "store">, call: HarnessCall): string | null {
  const header = call.req.headers[POLICY_VERSION_HEADER];
  const value = Array.isArray(header) ? header[0] : header;
  if (value) return value.slice(0, 128);
  if (ctx.policy.version !== null) return ctx.policy.version;
  const rolloutId = call.attribution.rolloutId;
  return (rolloutId === null ? null : ctx.store.getRollout(rolloutId)?.policyVersion) ?? null;
}

function finiteNumber(v: unknown): number | undefined {
  return typeof v === "number" && Number.isFinite(v) ? v : undefined;
}

/** temperature, top_p, top_k of the body sent upstream, where it sets them (numbers only). */
export function samplingOf(forwarded: Json): SamplingParams | null {
  // A named closure here would be renamed on every call under tsx (esbuild's keepNames): helpers live at module level.
  const num = finiteNumber;
  const sampling: SamplingParams = {};
  const temperature = num(forwarded["temperature"]);
  const topP = num(forwarded["top_p"]);
  const topK = num(forwarded["top_k"]);
  if (temperature !== undefined) sampling.temperature = temperature;
  if (topP !== undefined) sampling.topP = topP;
  if (topK !== undefined && Number.isInteger(topK)) sampling.topK = topK;
  return Object.keys(sampling).length ? sampling : null;
}

export function checkRolloutRequired(ctx: Pick<GatewayContext, "config">, attribution: Attribution): void {
  if (ctx.config.requireRollout && attribution.rolloutId === null) {
    throw new GatewayError(
      "RLGATE_ROLLOUT_REQUIRED",
      "this gateway requires every call to belong to a rollout: use the base URL /r/{rolloutId}/v1, a rollout key, or the x-rlgate-rollout header",
    );
  }
}

export class Exchange {
  readonly ctx: GatewayContext;
  readonly res: ServerResponse;
  readonly recorder: CallRecorder;
  readonly upstream: UpstreamAnswer;
  /** How the chat answer this exchange reads carries token ids (translated surfaces read it). */
  readonly chatCodec: ApiCodec;
  /** The rollout's recent prompt id lists, which the answer's prompt ids are compared with (null: no rollout). */
  readonly promptIds: RecentIdLists | null;
  readonly #gone: () => boolean;

  constructor(
    ctx: GatewayContext,
    res: ServerResponse,
    recorder: CallRecorder,
    upstream: UpstreamAnswer,
    gone: () => boolean,
    promptIds: RecentIdLists | null,
    chatCodec: ApiCodec = ctx.flavor.chat,
  ) {
    this.promptIds = promptIds;
    this.ctx = ctx;
    this.res = res;
    this.recorder = recorder;
    this.upstream = upstream;
    this.#gone = gone;
    this.chatCodec = chatCodec;
  }

  get harnessGone(): boolean {
    return this.#gone();
  }

  /** rlgate's own response headers: the call's id and the time rlgate spent on it so far. */
  headers(base: OutgoingHttpHeaders = {}): OutgoingHttpHeaders {
    return {
      ...base,
      "x-rlgate-call": String(this.recorder.seq),
      "x-rlgate-overhead-ms": this.recorder.overheadMs.toFixed(3),
    };
  }

  /**
   * Records a failure of the upstream's body (or the harness leaving), then ends the harness's response: by default
   * it breaks the connection, as a direct connection to the broken upstream would have.
   */
  async fail(
    failure: unknown,
    partial: Omit<CallOutcome, "status" | "error">,
    endHarness: (message: string) => void = () => this.res.destroy(),
  ): Promise<void> {
    const status = classifyUpstreamFailure(failure, this.harnessGone);
    const message = status === "client_aborted" ? "harness disconnected mid-stream" : (failure as Error).message;
    this.recorder.endWork();
    await this.recorder.finish({ ...partial, status, error: message });
    if (!this.harnessGone) endHarness(message);
    this.ctx.log.warn({ call: this.recorder.seq, status }, message);
  }

  /** Reads the upstream's whole body; null when it failed (recorded, harness connection broken). */
  async readBody(): Promise<Buffer | null> {
    this.recorder.endWork();
    try {
      const raw = await this.upstream.readAll();
      this.recorder.beginWork();
      return raw;
    } catch (error) {
      this.recorder.beginWork();
      await this.fail(error, {
        httpStatus: this.upstream.statusCode,
        response: null,
        promptTokenIds: null,
        choices: [],
      });
      return null;
    }
  }

  /**
   * Feeds the upstream's server-sent events to `onEvents`, the events each received chunk completes, as they arrive
   * (rlgate's time in it counts as overhead). Resolves with the failure that ended the stream, or null when it ended
   * cleanly; `rest` holds an event the stream was cut in the middle of.
   */
  async pumpEvents(onEvents: (events: SseEvent[]) => void): Promise<{ failure: unknown; rest: Buffer }> {
    const parser = new SseParser();
    let waitingForDrain = false;
    let failure: unknown = null;
    try {
      await this.upstream.pump((chunk: Buffer): boolean => {
        this.recorder.beginWork();
        const events = parser.push(chunk);
        if (events.length) onEvents(events);
        this.recorder.endWork();
        // A harness that reads slower than the upstream writes pauses the upstream instead of growing rlgate's buffers.
        if (this.res.writableNeedDrain && !this.harnessGone) {
          // Chunks the upstream had already sent still arrive while it pauses: one listener resumes it.
          if (!waitingForDrain) {
            waitingForDrain = true;
            this.res.once("drain", () => {
              waitingForDrain = false;
              this.upstream.resume();
            });
          }
          return false;
        }
        return true;
      });
    } catch (error) {
      failure = error;
    }
    this.recorder.beginWork();
    return { failure, rest: parser.rest() };
  }

  get isEventStream(): boolean {
    return (
      this.upstream.statusCode === 200 &&
      String(this.upstream.headers["content-type"] ?? "").includes("text/event-stream")
    );
  }
}

/**
 * Records the call's start and sends it upstream. Resolves with the exchange once the upstream's response head
 * arrived; null when the harness left first (recorded). An unreachable or silent upstream is recorded and thrown.
 */
export async function openExchange(
  ctx: GatewayContext,
  call: HarnessCall,
  spec: ExchangeSpec,
): Promise<Exchange | null> {
  // A store that cannot keep the call refuses it before it costs the upstream anything (store/disk-space.ts).
  const full = ctx.store.writeRefusal();
  if (full) throw asGatewayError(full);
  // A weight update in progress: the call waits for the resume (it is served by the new weights), it does not fail.
  const policyUpdate: PolicyUpdateRecord = {};
  if (ctx.policy.paused) policyUpdate.heldMs = Math.round((await ctx.policy.hold()) * 1000) / 1000;
  const { req, res, attribution } = call;
  const requestReceived = new RawJson(call.rawBody);
  const chat = spec.upstreamPath === CHAT_PATH;
  // Every surface's chat request is final here (Messages and Responses translated): the one place history is repaired.
  const repaired = chat && ctx.repair !== null ? ctx.repair.repair(attribution.rolloutId, spec.forwarded) : null;
  // A branch's decision call carries the branch's seed, a backbone's calls may ask for top logprobs (gateway/branching).
  const forwarded = branchForwarded(req, repaired?.forwarded ?? spec.forwarded, spec.upstreamPath);
  const payload = forwardedPayload(forwarded, call.body, requestReceived);
  const tools = forwarded["tools"];
  const toolCount = spec.toolCount ?? (chat ? (Array.isArray(tools) ? tools.length : 0) : undefined);
  const policyVersion = policyVersionOf(ctx, call);
  const recorder = new CallRecorder(
    ctx.store,
    ctx.metrics,
    {
      rolloutId: attribution.rolloutId,
      api: spec.api,
      path: req.url ?? "",
      stream: spec.stream,
      model: spec.model,
      requestReceived,
      requestForwarded: payload.record,
      ...(toolCount === undefined ? {} : { tools: toolCount }),
      ...(repaired?.repairs.length ? { repairs: repaired.repairs } : {}),
      policyVersion,
      policyUpdate,
      sampling: samplingOf(spec.forwarded),
      warnings: spec.warnings,
      maxTokensCap: spec.maxTokensCap,
      startEpoch: call.startEpoch,
      startPerf: call.startPerf,
      prompt: spec.prompt,
      limits: tokenLimits(ctx, forwarded),
      ...routingOf(ctx, spec, forwarded),
    },
    ctx.repair === null ? null : (record) => ctx.repair!.observe(record),
  );

  const upstreamCall = new UpstreamCall();
  let harnessGone = false;
  // What a leaving harness aborts: the upstream request, or the answer continued after a weight update.
  let live: { abort(): void } = upstreamCall;
  const onGone = () => {
    harnessGone = true;
    live.abort();
  };
  watchHarnessDisconnect(res, onGone);
  // A harness that left while its request was read and parsed is gone already ('close' has fired).
  if (res.destroyed) onGone();

  const omit = spec.omitHeader;
  const headers = omit ? Object.fromEntries(Object.entries(req.headers).filter(([name]) => !omit(name))) : req.headers;
  recorder.endWork();
  recorder.markUpstreamStart();
  let upstream: UpstreamCall;
  const target = {
    path: spec.upstreamPath,
    headers,
    dropAuthorization: attribution.usedRolloutKey,
    rolloutId: attribution.rolloutId,
    onReplica: (replica: string, retriedAfter: Error | null) => recorder.servedBy(replica, retriedAfter),
  };
  try {
    upstream = await forward(ctx, target, payload.bytes, upstreamCall);
  } catch (error) {
    recorder.beginWork();
    const status = classifyUpstreamFailure(error, harnessGone);
    await recorder.finish({
      status,
      httpStatus: null,
      error: (error as Error).message,
      response: null,
      promptTokenIds: null,
      choices: [],
    });
    if (harnessGone) return null;
    throw status === "timeout"
      ? new GatewayError("RLGATE_UPSTREAM_TIMEOUT", "the upstream did not answer in time", { cause: error })
      : new GatewayError(
          "RLGATE_UPSTREAM_UNREACHABLE",
          `the upstream could not be reached: ${(error as Error).message}`,
          {
            cause: error,
          },
        );
  }
  recorder.beginWork();
  recorder.markFirstByte();
  let native: UpstreamAnswer = upstream;
  if (continuable(spec.upstreamPath, forwarded)) {
    const continued = new ContinuedCompletion(upstream, {
      body: forwarded,
      reopen: (body, next) => forward(ctx, target, body, next),
      policy: ctx.policy,
      metrics: ctx.policy.metrics,
      record: policyUpdate,
      version: policyVersion,
    });
    live = continued;
    native = continued;
  } else if (forwarded["stream"] !== true && GENERATION_PATHS.has(spec.upstreamPath)) {
    const retried = new RetriedWhole(upstream, {
      reopen: (next) => forward(ctx, target, payload.bytes, next),
      policy: ctx.policy,
      metrics: ctx.policy.metrics,
      record: policyUpdate,
    });
    live = retried;
    native = retried;
  }
  const answer = spec.translateAnswer ? spec.translateAnswer(native, recorder) : native;
  const promptIds = ctx.recentPromptIds.of(attribution.rolloutId);
  return new Exchange(ctx, res, recorder, answer, () => harnessGone, promptIds, spec.chatCodec);
}

/** With `serve --routed-experts`: what the call asked of the upstream (and a vLLM stream re-emitted, counted). */
function routingOf(
  ctx: Pick<GatewayContext, "config" | "flavor" | "metrics">,
  spec: ExchangeSpec,
  forwarded: Json,
): Pick<CallStart, "routing"> {
  const setting = ctx.config.routedExperts;
  if (!setting) return {};
  const start = forwarded["routed_experts_start_len"];
  if (spec.stream && forwarded["stream"] !== true && ctx.flavor.name === "vllm")
    ctx.metrics.routedExpertsReemitted.inc();
  return { routing: { ask: { startLen: typeof start === "number" ? start : 0 }, setting } };
}

/**
 * What the upstream's answer to `forwarded` can hold: ids of the served model's vocabulary, and `n` choices per prompt
 * (a completions request may carry several prompts).
 */
function tokenLimits(ctx: Pick<GatewayContext, "config">, forwarded: Json): TokenLimits {
  const n = forwarded["n"];
  const perPrompt = typeof n === "number" && Number.isInteger(n) && n > 1 ? n : 1;
  const prompt = forwarded["prompt"];
  const prompts = Array.isArray(prompt) && prompt.length > 0 && typeof prompt[0] !== "number" ? prompt.length : 1;
  return { vocabSize: vocabularySize(forwarded["model"], ctx.config.vocabSize), choices: perPrompt * prompts };
}

/** A JSON object from bytes, or null when they are not one. */
export function parseJsonObject(raw: Buffer | string, promptIds: RecentIdLists | null = null): Json | null {
  try {
    const text = typeof raw === "string" ? raw : raw.toString("utf8");
    const value: unknown = promptIds === null ? JSON.parse(text) : parseReadingPromptIds(text, promptIds);
    return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Json) : null;
  } catch {
    return null;
  }
}

/**
 * The message of an error event inside a stream that started with 200: vLLM sends `data: {"error":{…}}` (then
 * `[DONE]`) when generation fails mid-stream. Null for any other event.
 */
export function streamErrorMessage(event: Json): string | null {
  const error = event["error"];
  if (error === undefined || error === null) return null;
  const message = typeof error === "object" ? (error as Json)["message"] : error;
  return `upstream error event mid-stream: ${typeof message === "string" ? message : JSON.stringify(error).slice(0, 500)}`;
}

/** A stream is complete when it carried choices and every one of them finished (a finish reason). */
export function streamIncomplete(choices: readonly ChoiceCapture[]): string | null {
  if (choices.length === 0) return "upstream stream ended without any choice";
  const open = choices.find((c) => c.finishReason === null);
  return open ? `upstream stream ended before choice ${open.index} finished (no finish reason)` : null;
}

/** The upstream's error response as the call's outcome: recorded as failed, never trained on. */
export function upstreamErrorOutcome(httpStatus: number, parsed: Json | null, raw: Buffer): CallOutcome {
  return {
    status: "upstream_error",
    httpStatus,
    error: httpStatus === 200 ? "upstream sent a response that is not a JSON object" : `upstream HTTP ${httpStatus}`,
    response: parsed ?? raw.toString("utf8"),
    promptTokenIds: null,
    choices: [],
  };
}
