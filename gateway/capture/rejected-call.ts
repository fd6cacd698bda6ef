// A harness request rlgate refused before sending anything upstream (malformed JSON, an invalid or untranslatable
// body, a body over the limit, a call into a finished rollout) is still a call of its rollout: recorded with status
// `rejected`, the reason and the body as received, so `GET /api/rollouts/{id}/calls` explains a rollout that holds no
// answered call, or shows that its harness went on calling after the finish. Never trained on.
import { RawJson, type ApiSurface, type CallRecord } from "../../store/records.ts";
import type { GatewayContext } from "../context.ts";
import type { GatewayError } from "../errors.ts";

/** Refusals that are recorded: the request reached a surface and was found wanting. */
const RECORDED = new Set(["RLGATE_BAD_REQUEST", "RLGATE_BODY_TOO_LARGE"]);

export interface RejectedRequest {
  rolloutId: string | null;
  api: ApiSurface;
  path: string;
  /** The body's bytes as received; null when it was not read (over the limit). */
  rawBody: Buffer | null;
  /** The body as parsed, when it parsed. */
  body: unknown;
  startEpoch: number;
  startPerf: number;
}

/** The body as it is stored: its own bytes when they are JSON, else its text (kept even when malformed). */
function receivedBody(raw: Buffer | null, body: unknown): unknown {
  if (raw === null) return null;
  return body !== undefined ? new RawJson(raw) : raw.toString("utf8");
}

export function isRecordedRejection(error: GatewayError): boolean {
  return RECORDED.has(error.code);
}

/**
 * Records the refusal. Into a rollout that is no longer open only the refusal of its finish is recorded (`finished`):
 * any other refusal there would be a second record of the same late call.
 */
export async function recordRejected(
  ctx: Pick<GatewayContext, "store" | "metrics" | "log">,
  request: RejectedRequest,
  error: GatewayError,
  answer: string,
  options: { finished?: boolean } = {},
): Promise<void> {
  if (!options.finished && request.rolloutId !== null && ctx.store.getRollout(request.rolloutId)?.status !== "open")
    return;
  // A full store keeps its room for the calls it admitted; a refusal is answered without its record (said once, by the
  // store, not once a refusal).
  if (ctx.store.writeRefusal()) return;
  const body = request.body;
  const stream = typeof body === "object" && body !== null && (body as Record<string, unknown>)["stream"] === true;
  const model = typeof body === "object" && body !== null ? (body as Record<string, unknown>)["model"] : undefined;
  const now = Date.now();
  const record: CallRecord = {
    seq: ctx.store.nextCallSeq(),
    rolloutId: request.rolloutId,
    api: request.api,
    path: request.path,
    stream,
    model: typeof model === "string" ? model : null,
    status: "rejected",
    httpStatus: null,
    error: `${error.code}: ${error.message}`,
    requestReceived: receivedBody(request.rawBody, body),
    requestForwarded: null,
    response: new RawJson(answer),
    promptTokenIds: null,
    choices: [],
    tokenSource: "missing",
    tokenIssue: "rejected by rlgate: never sent upstream",
    timings: {
      start: request.startEpoch,
      upstreamStart: null,
      firstByte: null,
      firstToken: null,
      end: now,
      overheadMs: Math.round((performance.now() - request.startPerf) * 1000) / 1000,
    },
  };
  ctx.metrics.recordCall(record);
  await ctx.store.putCall(record);
  ctx.log.info({ call: record.seq, status: "rejected" }, error.message);
}
