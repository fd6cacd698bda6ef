// A harness call the gateway refused before it went upstream (a call into a finished rollout) is still recorded, as
// `rejected`: the rollout's record shows that its harness went on calling, and nothing of it is ever trained.
import type { IncomingMessage } from "node:http";
import { RawJson, type ApiSurface } from "../../store/records.ts";
import type { Attribution } from "../attribution.ts";
import { parseJsonBody } from "../body.ts";
import type { GatewayContext } from "../context.ts";
import { CallRecorder } from "./call-recorder.ts";

const API_OF_ROUTE: Record<string, ApiSurface> = {
  "/v1/chat/completions": "chat.completions",
  "/v1/completions": "completions",
  "/v1/responses": "responses",
  "/v1/messages": "messages",
};

export interface RefusedCall {
  req: IncomingMessage;
  attribution: Attribution;
  rawBody: Buffer;
  routePath: string;
  startEpoch: number;
  startPerf: number;
}

/** Records a refused call of a captured route (count_tokens records nothing, refused or not). */
export async function recordRejected(ctx: GatewayContext, call: RefusedCall, reason: string): Promise<void> {
  const api = API_OF_ROUTE[call.routePath];
  if (api === undefined) return;
  let body: unknown = null;
  try {
    body = parseJsonBody(call.rawBody);
  } catch {
    // A body that is not JSON is not kept: the record says why the call was refused, which is what matters.
  }
  const fields = typeof body === "object" && body !== null && !Array.isArray(body) ? (body as Record<string, unknown>) : {};
  const recorder = new CallRecorder(ctx.store, ctx.metrics, {
    rolloutId: call.attribution.rolloutId,
    api,
    path: call.req.url ?? "",
    stream: fields["stream"] === true,
    model: typeof fields["model"] === "string" ? fields["model"] : null,
    requestReceived: body === null ? null : new RawJson(call.rawBody),
    requestForwarded: null,
    startEpoch: call.startEpoch,
    startPerf: call.startPerf,
  });
  recorder.endWork();
  await recorder.finish({ status: "rejected", httpStatus: null, error: reason, response: null, promptTokenIds: null, choices: [] });
}
