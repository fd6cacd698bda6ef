// Relays a call of an API the upstream does not speak with token ids (Anthropic Messages, OpenAI Responses): it went
// upstream as a chat completion; the chat answer is captured as on the chat surface and translated back by the
// surface's encoder, chunk by chunk as it arrives. The encoder's last frame (`message_stop`, `response.completed`) —
// or a whole response's body — is held back until the record is committed.
import type { CallOutcome } from "../capture/call-recorder.ts";
import { upstreamErrorBody, type ErrorShape } from "../errors.ts";
import { chatChunksFromResponse } from "../upstream/chat-chunks.ts";
import type { Json } from "../upstream/fields.ts";
import type { HarnessWants } from "../upstream/flavor.ts";
import {
  parseJsonObject,
  streamErrorMessage,
  streamIncomplete,
  upstreamErrorOutcome,
  type Exchange,
} from "./exchange.ts";

/** Writes one surface's response from the upstream's chat chunks. */
export interface TranslationEncoder {
  /** Frames for one upstream chat chunk ("" when it adds nothing the harness sees yet). */
  chunk(chunk: Json): string;
  /** The prompt length, when the capture knows it before the chunks tell (an upstream that answered whole). */
  setPromptTokens(count: number | null): void;
  /** The end of a complete answer: frames to send now, and the last frame, held until the record is committed. */
  finish(): { frames: string; last: string };
  /** The response as the harness's API returns it whole: the non-streamed body, and the record's `response`. */
  snapshot(): Json;
  /** The frame that tells a streaming harness the upstream failed mid-answer. */
  failureFrame(message: string): string;
}

export interface TranslatedRelay {
  encoder: TranslationEncoder;
  errorShape: ErrorShape;
  /** Whether the harness asked for a stream. */
  stream: boolean;
  /** The streamed answer's content type (default: server-sent events; Gemini without `alt=sse` streams a JSON array). */
  streamContentType?: string;
  /** Called once the call is committed as ok, with the delivered response and the upstream's chat response. */
  onComplete?(delivered: Json, upstreamChat: Json): void;
}

const SSE_HEADERS = { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" };
/** Token ids and logprobs live in the capture; the upstream chat response is kept without them. */
const KEEP_NONE: HarnessWants = { promptTokenIds: false, tokenIds: false, logprobs: false, routedExperts: false };

function streamHeaders(spec: TranslatedRelay): Record<string, string> {
  return spec.streamContentType ? { ...SSE_HEADERS, "content-type": spec.streamContentType } : SSE_HEADERS;
}

export async function relayTranslated(ex: Exchange, spec: TranslatedRelay): Promise<void> {
  if (ex.isEventStream) return relayStream(ex, spec);
  const raw = await ex.readBody();
  if (raw === null) return;
  const parsed = parseJsonObject(raw, ex.promptIds);
  const { recorder, res, upstream } = ex;
  if (upstream.statusCode !== 200 || parsed === null) {
    recorder.endWork();
    await recorder.finish(upstreamErrorOutcome(upstream.statusCode, parsed, raw));
    if (ex.harnessGone) return;
    // The upstream's status is kept; a 200 that is not a chat completion is the upstream's fault: 502.
    const status = upstream.statusCode === 200 ? 502 : upstream.statusCode;
    const body = upstreamErrorBody(spec.errorShape, status, parsed ?? raw.toString("utf8"));
    res.writeHead(
      status,
      ex.headers({ "content-type": "application/json", "content-length": Buffer.byteLength(body) }),
    );
    res.end(body);
    return;
  }

  recorder.markFirstToken();
  const codec = ex.chatCodec;
  const captured = codec.captureWhole(parsed);
  const { encoder } = spec;
  encoder.setPromptTokens(captured.promptTokenIds?.length ?? null);
  let frames = "";
  for (const chunk of chatChunksFromResponse(parsed, { includeUsage: true })) frames += encoder.chunk(chunk);
  const end = encoder.finish();
  const delivered = encoder.snapshot();
  codec.stripWhole(parsed, KEEP_NONE);
  const outcome: CallOutcome = {
    status: "ok",
    httpStatus: 200,
    response: delivered,
    upstreamResponse: parsed,
    usage: parsed["usage"] as CallOutcome["usage"],
    ...captured,
  };
  if (spec.stream) {
    if (!ex.harnessGone) {
      res.writeHead(200, ex.headers(streamHeaders(spec)));
      res.write(frames + end.frames);
    }
    recorder.endWork();
    await recorder.finish(outcome);
    spec.onComplete?.(delivered, parsed);
    if (!ex.harnessGone) res.end(end.last);
    return;
  }
  const body = JSON.stringify(delivered);
  recorder.endWork();
  await recorder.finish(outcome);
  spec.onComplete?.(delivered, parsed);
  if (ex.harnessGone) return;
  res.writeHead(200, ex.headers({ "content-type": "application/json", "content-length": Buffer.byteLength(body) }));
  res.end(body);
}

async function relayStream(ex: Exchange, spec: TranslatedRelay): Promise<void> {
  const { recorder, res } = ex;
  const { encoder } = spec;
  const assembler = ex.chatCodec.newAssembler();
  let malformed: string | null = null;
  let upstreamError: string | null = null;

  res.writeHead(200, ex.headers(streamHeaders(spec)));
  res.flushHeaders();
  recorder.endWork();

  const { failure } = await ex.pumpEvents((events) => {
    let out = "";
    for (const event of events) {
      if (event.data === null) continue;
      if (event.data.trim() === "[DONE]") continue;
      const parsed = parseJsonObject(event.data, ex.promptIds);
      if (parsed === null) {
        malformed ??= `upstream sent an event that is not a JSON object: ${event.data.slice(0, 200)}`;
        continue;
      }
      const errorMessage = streamErrorMessage(parsed);
      if (errorMessage !== null) {
        upstreamError ??= errorMessage; // told to the harness in its API's shape once the stream ends
        continue;
      }
      if (assembler.add(parsed)) recorder.markFirstToken();
      out += encoder.chunk(parsed);
    }
    if (out && !ex.harnessGone) res.write(out);
  });

  const upstreamChat = assembler.assembled();
  const choices = assembler.captures();
  const usage = upstreamChat["usage"] as CallOutcome["usage"];
  ex.chatCodec.stripWhole(upstreamChat, KEEP_NONE);
  const endHarness = (message: string): void => void res.end(encoder.failureFrame(message));
  const incomplete = upstreamError ?? malformed ?? streamIncomplete(choices);
  if (failure !== null || ex.harnessGone || incomplete !== null) {
    const reason = failure ?? new Error(incomplete ?? "");
    const partial = {
      httpStatus: 200,
      response: encoder.snapshot(),
      upstreamResponse: upstreamChat,
      promptTokenIds: assembler.promptTokenIds,
      choices,
      usage,
    };
    if (failure === null && !ex.harnessGone) {
      // The upstream ended cleanly but short: recorded as its error, not as a transport failure.
      recorder.endWork();
      await recorder.finish({ ...partial, status: "upstream_error", error: (reason as Error).message });
      endHarness((reason as Error).message);
      return;
    }
    return ex.fail(reason, partial, endHarness);
  }
  const end = encoder.finish();
  if (!ex.harnessGone) res.write(end.frames);
  const delivered = encoder.snapshot();
  recorder.endWork();
  await recorder.finish({
    status: "ok",
    httpStatus: 200,
    response: delivered,
    upstreamResponse: upstreamChat,
    promptTokenIds: assembler.promptTokenIds,
    choices,
    usage,
    routedExperts: assembler.routedExperts,
  });
  spec.onComplete?.(delivered, upstreamChat);
  if (!ex.harnessGone) res.end(end.last);
}
