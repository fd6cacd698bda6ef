// Sends one captured call upstream, wiring the harness's disconnect to an abort of the upstream request so that no
// GPU time is spent on an answer nobody will read.
import type { IncomingHttpHeaders, ServerResponse } from "node:http";
import { errors as undiciErrors } from "undici";
import type { GatewayConfig, GatewayContext } from "./context.ts";
import { upstreamRequestHeaders } from "./headers.ts";
import { UpstreamCall } from "./upstream/upstream-call.ts";

export function watchHarnessDisconnect(res: ServerResponse, onDisconnect: () => void): void {
  res.on("close", () => {
    if (!res.writableFinished) onDisconnect();
  });
}

/** Where and with which harness headers one call goes upstream. */
export interface ForwardTarget {
  /** Upstream route, e.g. /v1/chat/completions (the upstream's base path is prepended). */
  path: string;
  /** The harness's request headers (hop-by-hop and rlgate's own are removed). */
  headers: IncomingHttpHeaders;
  /** True when the harness authenticated with a rollout key, which must not travel upstream. */
  dropAuthorization: boolean;
  /** The call's rollout: its calls stay on one replica (null or absent: the least busy replica). */
  rolloutId?: string | null;
  /** Hears which replica the call went to, and again when a refused connection sent it to another. */
  onReplica?: (replica: string, retriedAfter: Error | null) => void;
}

/**
 * Sends one call upstream. Resolves with the call once the upstream's response head arrived; rejects when the
 * upstream could not be reached or sent no head in time. `call.abort()` cancels it.
 */
export function forward(
  ctx: Pick<GatewayContext, "upstream"> & { config: Pick<GatewayConfig, "controlToken"> },
  target: ForwardTarget,
  body: string | Uint8Array,
  call = new UpstreamCall(),
): Promise<UpstreamCall> {
  const { upstream } = ctx;
  const onReplica = target.onReplica;
  upstream.dispatch(
    target.rolloutId ?? null,
    {
      method: "POST",
      path: target.path,
      headers: upstreamRequestHeaders(target.headers, {
        dropAuthorization: target.dropAuthorization,
        apiKey: upstream.apiKey,
        controlToken: ctx.config.controlToken,
      }),
      body,
    },
    call,
    onReplica && ((replica, after) => onReplica(replica.url, after)),
  );
  return call.head;
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
