// POST /v1/chat/completions: attribute → parse → forward (with token ids and logprobs requested) → capture → respond.
// Streams are relayed event by event as they arrive; the final `[DONE]` (or the end of the body) is held back until
// the call's record is committed, so a harness never sees a complete answer that is not on disk.
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Dispatcher } from "undici";
import { RawJson } from "../../../store/records.ts";
import type { Attribution } from "../../attribution.ts";
import { CallRecorder, type CallOutcome } from "../../capture/call-recorder.ts";
import type { GatewayContext } from "../../context.ts";
import { GatewayError } from "../../errors.ts";
import { classifyUpstreamFailure, forward, watchHarnessDisconnect } from "../../forward.ts";
import { harnessResponseHeaders } from "../../headers.ts";
import { SseParser } from "../../sse-parser.ts";
import { isTokenOnlyChunk, prepareChatRequest, stripChatChunk, stripChatResponse, type HarnessWants } from "../../upstream/vllm.ts";
import { ChatStreamAssembler, captureChatResponse } from "./assembler.ts";
import { parseChatRequest } from "./request.ts";

type Json = Record<string, unknown>;

export interface ChatCall {
  req: IncomingMessage;
  res: ServerResponse;
  attribution: Attribution;
  body: unknown;
  /** The body's bytes as received (recorded as they are). */
  rawBody: Buffer;
  startEpoch: number;
  startPerf: number;
}

export async function handleChatCompletions(ctx: GatewayContext, call: ChatCall): Promise<void> {
  const { req, res, attribution } = call;
  const request = parseChatRequest(call.body);
  if (ctx.config.requireRollout && attribution.rolloutId === null) {
    throw new GatewayError(
      "RLGATE_ROLLOUT_REQUIRED",
      "this gateway requires every call to belong to a rollout: use the base URL /r/{rolloutId}/v1, a rollout key, or the x-rlgate-rollout header",
    );
  }
  const { forwarded, wants } = prepareChatRequest(request);
  const payload = JSON.stringify(forwarded);
  const recorder = new CallRecorder(ctx.store, ctx.metrics, {
    rolloutId: attribution.rolloutId,
    api: "chat.completions",
    path: req.url ?? "",
    stream: request.stream === true,
    model: request.model ?? null,
    requestReceived: new RawJson(call.rawBody),
    requestForwarded: new RawJson(payload),
    startEpoch: call.startEpoch,
    startPerf: call.startPerf,
  });

  const abort = new AbortController();
  let harnessGone = false;
  watchHarnessDisconnect(res, () => {
    harnessGone = true;
    abort.abort();
  });

  recorder.endWork();
  recorder.markUpstreamStart();
  let upstream: Dispatcher.ResponseData;
  try {
    upstream = await forward(ctx, req, attribution, payload, abort);
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
    if (harnessGone) return;
    throw status === "timeout"
      ? new GatewayError("RLGATE_UPSTREAM_TIMEOUT", "the upstream did not answer in time", { cause: error })
      : new GatewayError("RLGATE_UPSTREAM_UNREACHABLE", `the upstream could not be reached: ${(error as Error).message}`, {
          cause: error,
        });
  }
  recorder.beginWork();
  recorder.markFirstByte();

  const contentType = String(upstream.headers["content-type"] ?? "");
  if (upstream.statusCode === 200 && contentType.includes("text/event-stream")) {
    await relayStream(ctx, res, upstream, recorder, wants, () => harnessGone);
  } else {
    await relayWhole(res, upstream, recorder, wants, () => harnessGone);
  }
}

function overheadHeader(recorder: CallRecorder): string {
  return recorder.overheadMs.toFixed(3);
}

/** Non-streamed responses and every upstream error: read whole, capture, commit, then send. */
async function relayWhole(
  res: ServerResponse,
  upstream: Dispatcher.ResponseData,
  recorder: CallRecorder,
  wants: HarnessWants,
  harnessGone: () => boolean,
): Promise<void> {
  recorder.endWork();
  let raw: Buffer;
  try {
    raw = Buffer.from(await upstream.body.arrayBuffer());
  } catch (error) {
    recorder.beginWork();
    const status = classifyUpstreamFailure(error, harnessGone());
    await recorder.finish({
      status,
      httpStatus: upstream.statusCode,
      error: (error as Error).message,
      response: null,
      promptTokenIds: null,
      choices: [],
    });
    // The upstream broke the connection: break the harness's too, as a direct connection would have.
    if (!harnessGone()) res.destroy();
    return;
  }
  recorder.beginWork();
  const headers = harnessResponseHeaders(upstream.headers);
  let parsed: Json | null = null;
  try {
    const value: unknown = JSON.parse(raw.toString("utf8"));
    if (typeof value === "object" && value !== null && !Array.isArray(value)) parsed = value as Json;
  } catch {
    parsed = null;
  }

  let out = raw;
  if (upstream.statusCode === 200 && parsed) {
    const captured = captureChatResponse(parsed);
    stripChatResponse(parsed, wants);
    out = Buffer.from(JSON.stringify(parsed));
    recorder.endWork();
    await recorder.finish({
      status: "ok",
      httpStatus: 200,
      response: new RawJson(out),
      usage: parsed["usage"] as CallOutcome["usage"],
      ...captured,
    });
  } else {
    // Errors pass through verbatim; the call is recorded as failed and never trained on.
    recorder.endWork();
    await recorder.finish({
      status: "upstream_error",
      httpStatus: upstream.statusCode,
      error: upstream.statusCode === 200 ? "upstream sent a response that is not a JSON object" : `upstream HTTP ${upstream.statusCode}`,
      response: parsed ?? raw.toString("utf8"),
      promptTokenIds: null,
      choices: [],
    });
  }
  if (harnessGone()) return;
  headers["content-length"] = out.length;
  headers["x-rlgate-call"] = String(recorder.seq);
  headers["x-rlgate-overhead-ms"] = overheadHeader(recorder);
  res.writeHead(upstream.statusCode, headers);
  res.end(out);
}

const DONE = "[DONE]";

async function relayStream(
  ctx: GatewayContext,
  res: ServerResponse,
  upstream: Dispatcher.ResponseData,
  recorder: CallRecorder,
  wants: HarnessWants,
  harnessGone: () => boolean,
): Promise<void> {
  const stripNeeded = !wants.tokenIds || !wants.logprobs;
  const parser = new SseParser();
  const assembler = new ChatStreamAssembler();
  let held: Buffer | null = null;
  let malformed: string | null = null;

  const headers = harnessResponseHeaders(upstream.headers);
  headers["x-rlgate-call"] = String(recorder.seq);
  headers["x-rlgate-overhead-ms"] = overheadHeader(recorder);
  res.writeHead(200, headers);
  res.flushHeaders();
  recorder.endWork();

  const onData = (chunk: Buffer): void => {
    recorder.beginWork();
    const pieces: Buffer[] = [];
    for (const event of parser.push(chunk)) {
      if (event.data === null) {
        pieces.push(event.raw);
        continue;
      }
      if (event.data.trim() === DONE) {
        held = event.raw;
        continue;
      }
      let parsed: Json;
      try {
        parsed = JSON.parse(event.data) as Json;
      } catch {
        malformed ??= `upstream sent an event that is not JSON: ${event.data.slice(0, 200)}`;
        pieces.push(event.raw);
        continue;
      }
      if (assembler.add(parsed)) recorder.markFirstToken();
      if (stripNeeded) {
        if (!wants.tokenIds && isTokenOnlyChunk(parsed)) continue;
        stripChatChunk(parsed, wants);
        pieces.push(Buffer.from(`data: ${JSON.stringify(parsed)}\n\n`));
      } else {
        pieces.push(event.raw);
      }
    }
    if (pieces.length && !harnessGone()) res.write(pieces.length === 1 ? pieces[0]! : Buffer.concat(pieces));
    recorder.endWork();
  };

  let failure: unknown = null;
  try {
    await new Promise<void>((resolve, reject) => {
      upstream.body.on("data", onData);
      upstream.body.once("end", resolve);
      upstream.body.once("error", reject);
    });
  } catch (error) {
    failure = error;
  }
  recorder.beginWork();

  const response = assembler.assembled();
  stripChatResponse(response, wants);
  const base = {
    httpStatus: 200,
    response,
    promptTokenIds: assembler.promptTokenIds,
    choices: assembler.captures(),
    usage: response["usage"] as CallOutcome["usage"],
  };
  if (failure !== null || harnessGone()) {
    const status = classifyUpstreamFailure(failure, harnessGone());
    const message = status === "client_aborted" ? "harness disconnected mid-stream" : (failure as Error).message;
    recorder.endWork();
    await recorder.finish({ ...base, status, error: message });
    if (!harnessGone()) res.destroy();
    ctx.log(`call ${recorder.seq}: ${status}: ${message}`);
    return;
  }
  const rest = parser.rest();
  const complete = held !== null || base.choices.some((c) => c.finishReason !== null);
  recorder.endWork();
  await recorder.finish({
    ...base,
    status: complete && malformed === null ? "ok" : "upstream_error",
    error: malformed ?? (complete ? null : "upstream stream ended before any choice finished"),
  });
  if (harnessGone()) return;
  if (rest.length) res.write(rest);
  res.end(held ?? undefined);
}
