// Relays a call the upstream answers in the harness's own API (chat completions, completions): the response goes back
// as the upstream sent it, minus the token-id and logprob fields rlgate asked for itself. Streams are relayed event by
// event as they arrive; the final `[DONE]` (or the end of the body) is held back until the call's record is committed,
// so a harness never sees a complete answer that is not on disk.
import { RawJson, type ApiSurface } from "../../store/records.ts";
import type { CallOutcome } from "../capture/call-recorder.ts";
import type { GatewayContext } from "../context.ts";
import { harnessResponseHeaders } from "../headers.ts";
import type { Json } from "../upstream/fields.ts";
import { withServedModel } from "../upstream/model-map.ts";
import { NativeStreamEvents } from "./native-events.ts";
import { topEntriesAsked } from "../branching/entropy.ts";
import { stripRouting } from "../upstream/routed-experts.ts";
import { wantsEverything, type ApiCodec, type HarnessWants, type PreparedRequest } from "../upstream/flavor.ts";
import {
  checkRolloutRequired,
  openExchange,
  parseJsonObject,
  streamIncomplete,
  upstreamErrorOutcome,
  type Exchange,
  type HarnessCall,
} from "./exchange.ts";

/** A surface whose API the upstream speaks: the request goes upstream as it came, with what capture needs added. */
export interface NativeSurface {
  api: ApiSurface;
  upstreamPath: string;
  codec: ApiCodec;
}

export async function handleNative(
  ctx: GatewayContext,
  call: HarnessCall,
  surface: NativeSurface,
  request: Json,
): Promise<void> {
  checkRolloutRequired(ctx, call.attribution);
  const stream = request["stream"] === true;
  const model = request["model"];
  const prepared = surface.codec.prepare(
    withServedModel(ctx.modelMap, request),
    stream,
    ctx.config.routedExperts ? { startLen: 0 } : null,
  );
  const ex = await openExchange(ctx, call, {
    api: surface.api,
    upstreamPath: surface.upstreamPath,
    stream,
    model: typeof model === "string" ? model : null,
    forwarded: prepared.forwarded,
  });
  if (ex) await relayNative(ex, surface.codec, prepared, request);
}

const DONE = "[DONE]";
const DONE_EVENT = `data: ${DONE}\n\n`;

export async function relayNative(
  ex: Exchange,
  codec: ApiCodec,
  prepared: PreparedRequest,
  harnessRequest: Json,
): Promise<void> {
  if (ex.isEventStream) return relayStream(ex, codec, prepared.wants);
  const raw = await ex.readBody();
  if (raw === null) return;
  const ok = ex.upstream.statusCode === 200;
  const reemitted = ok && harnessRequest["stream"] === true && !prepared.upstreamStream && codec.reemit;
  const text = raw.toString("utf8");
  // Branching's top entries are read from the parsed entries: the scan, which keeps only logprobs, is not used then.
  const scanned =
    ok && !reemitted && !topEntriesAsked(ex.res) ? codec.parseWhole?.(text, prepared.wants, ex.promptIds) : null;
  const parsed = scanned ?? parseJsonObject(text, ex.promptIds);
  if (reemitted && parsed) {
    return relayReemitted(ex, codec, prepared.wants, parsed, codec.reemit!(parsed, harnessRequest));
  }
  return relayWhole(ex, codec, prepared.wants, raw, parsed);
}

/** Non-streamed responses and every upstream error: read whole, capture, commit, then send. */
async function relayWhole(
  ex: Exchange,
  codec: ApiCodec,
  wants: HarnessWants,
  raw: Buffer,
  parsed: Json | null,
): Promise<void> {
  const { recorder, upstream } = ex;
  let out = raw;
  if (upstream.statusCode === 200 && parsed) {
    const captured = codec.captureWhole(parsed);
    if (!wantsEverything(wants)) {
      codec.stripWhole(parsed, wants);
      out = Buffer.from(JSON.stringify(parsed));
    }
    // Routed experts the harness gets (vLLM sends them to every caller) are kept decoded on the choices, not as
    // base64 in the stored response: stored once per token, not once per call.
    const recorded = captured.routedExperts?.length && stripRouting(parsed) ? parsed : new RawJson(out);
    recorder.endWork();
    await recorder.finish({
      status: "ok",
      httpStatus: 200,
      response: recorded,
      usage: parsed["usage"] as CallOutcome["usage"],
      ...captured,
    });
  } else {
    // Errors pass through verbatim; the call is recorded as failed and never trained on.
    recorder.endWork();
    await recorder.finish(upstreamErrorOutcome(upstream.statusCode, parsed, raw));
  }
  if (ex.harnessGone) return;
  const headers = harnessResponseHeaders(upstream.headers);
  headers["content-length"] = out.length;
  ex.res.writeHead(upstream.statusCode, ex.headers(headers));
  ex.res.end(out);
}

async function relayStream(ex: Exchange, codec: ApiCodec, wants: HarnessWants): Promise<void> {
  const { recorder, res } = ex;
  const read = topEntriesAsked(ex.res) ? { ...wants, topEntries: true } : wants;
  const stream = new NativeStreamEvents(codec, read, () => recorder.markFirstToken(), ex.promptIds);
  const { assembler } = stream;

  res.writeHead(200, ex.headers(harnessResponseHeaders(ex.upstream.headers)));
  // The head goes out with the first events when they arrive in the same read as the upstream's head (one write
  // instead of two); otherwise it is flushed on the next turn of the event loop, as soon as the upstream's was.
  let wroteBody = false;
  setImmediate(() => {
    if (!wroteBody && stream.held === null && !res.writableEnded && !ex.harnessGone) res.flushHeaders();
  });
  recorder.endWork();

  // What one read of the upstream's socket brings leaves in one write, once the read is handled (undici hands over
  // each HTTP chunk of it, often one event each): a write per event costs the HTTP machinery and the kernel more than
  // the events' own handling. The read that ends the stream waits for the commit and leaves with `[DONE]`.
  let flushQueued = false;
  const flush = () => {
    flushQueued = false;
    if (stream.held !== null || ex.harnessGone) return;
    const bytes = stream.take();
    if (bytes === null) return;
    wroteBody = true;
    res.write(bytes);
  };
  const { failure, rest } = await ex.pumpEvents((events) => {
    stream.add(events);
    if (!flushQueued) {
      flushQueued = true;
      process.nextTick(flush);
    }
  });

  // The record keeps the whole response the stream stands for, as the harness received it: a few hundred bytes where
  // the events would be ~100 a token, and cheaper to build and commit than they are to store (docs/gateway.md).
  const response = assembler.assembled();
  codec.stripWhole(response, wants);
  const base = {
    httpStatus: 200,
    response,
    promptTokenIds: assembler.promptTokenIds,
    choices: assembler.captures(),
    usage: response["usage"] as CallOutcome["usage"],
    routedExperts: assembler.routedExperts,
  };
  if (failure !== null || ex.harnessGone) {
    // What arrived before the break reaches the harness, as it would have without the wait for the commit.
    const arrived = stream.take();
    if (arrived !== null && !ex.harnessGone) res.write(arrived);
    return ex.fail(failure, base);
  }
  // An error event, or a stream without a finish reason, is a failed call even when it ended with [DONE].
  const error = stream.upstreamError ?? stream.malformed ?? streamIncomplete(base.choices);
  recorder.endWork();
  await recorder.finish({ ...base, status: error === null ? "ok" : "upstream_error", error });
  if (ex.harnessGone) return;
  res.end(stream.takeLast(rest) ?? undefined);
}

/**
 * A streamed call the upstream answered whole (SGLang chat): captured from the whole response, then sent to the
 * harness as the stream of chunks it corresponds to, `[DONE]` after the commit.
 */
async function relayReemitted(
  ex: Exchange,
  codec: ApiCodec,
  wants: HarnessWants,
  whole: Json,
  chunks: Json[],
): Promise<void> {
  const { recorder, res } = ex;
  recorder.markFirstToken();
  const captured = codec.captureWhole(whole);
  let body = "";
  for (const chunk of chunks) {
    codec.stripWhole(chunk, wants);
    body += `data: ${JSON.stringify(chunk)}\n\n`;
  }
  codec.stripWhole(whole, wants);
  stripRouting(whole); // kept decoded on the choices (captured above)
  if (!ex.harnessGone) {
    res.writeHead(200, ex.headers({ "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" }));
    res.write(body);
  }
  recorder.endWork();
  await recorder.finish({
    status: "ok",
    httpStatus: 200,
    response: whole,
    usage: whole["usage"] as CallOutcome["usage"],
    ...captured,
  });
  if (ex.harnessGone) return;
  res.end(DONE_EVENT);
}
