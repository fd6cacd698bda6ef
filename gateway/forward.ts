// Sends one captured call upstream, wiring the harness's disconnect to an abort of the upstream request so that no
// GPU time is spent on an answer nobody will read.
import type { IncomingMessage, ServerResponse } from "node:http";
import { errors as undiciErrors, type Dispatcher } from "undici";
import type { Attribution } from "./attribution.ts";
import type { GatewayContext } from "./context.ts";
import { upstreamRequestHeaders } from "./headers.ts";

export interface Forwarded {
  response: Dispatcher.ResponseData;
  abort: AbortController;
}

export function watchHarnessDisconnect(res: ServerResponse, onDisconnect: () => void): void {
  res.on("close", () => {
    if (!res.writableFinished) onDisconnect();
  });
}

export async function forward(
  ctx: GatewayContext,
  req: IncomingMessage,
  attribution: Attribution,
  body: string,
  abort: AbortController,
): Promise<Dispatcher.ResponseData> {
  const { upstream } = ctx;
  return upstream.pool.request({
    method: "POST",
    path: upstream.basePath + attribution.routePath,
    headers: upstreamRequestHeaders(req.headers, {
      dropAuthorization: attribution.usedRolloutKey,
      apiKey: upstream.apiKey,
    }),
    body,
    signal: abort.signal,
  });
}

export type FailureKind = "client_aborted" | "timeout" | "upstream_error";

/** Classifies an error from the upstream request or its body stream. */
export function classifyUpstreamFailure(error: unknown, abortedByHarness: boolean): FailureKind {
  if (abortedByHarness) return "client_aborted";
  if (error instanceof undiciErrors.HeadersTimeoutError || error instanceof undiciErrors.BodyTimeoutError) {
    return "timeout";
  }
  return "upstream_error";
}
