// The gateway's HTTP server: routes each request to a capture surface, the control API, metrics/health, or the
// pass-through to the upstream. Errors become the harness API's own error shape here, in one place.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { attribute, splitRolloutPath } from "./attribution.ts";
import { parseJsonBody, readBody } from "./body.ts";
import type { GatewayContext } from "./context.ts";
import { handleControlApi } from "./control-api.ts";
import { GatewayError, asGatewayError, toErrorBody, type ErrorShape } from "./errors.ts";
import { Passthrough, isPassthroughPath } from "./passthrough.ts";
import type { HarnessCall } from "./relay/exchange.ts";
import { handleChatCompletions } from "./surfaces/chat/index.ts";
import { handleCompletions } from "./surfaces/completions/index.ts";
import { handleCountTokens } from "./surfaces/messages/count-tokens.ts";
import { handleMessages } from "./surfaces/messages/index.ts";
import { handleResponses } from "./surfaces/responses/index.ts";

/** The capture surfaces: harness APIs rlgate records, by route (POST). */
const SURFACES: Record<string, (ctx: GatewayContext, call: HarnessCall) => Promise<void>> = {
  "/v1/chat/completions": handleChatCompletions,
  "/v1/completions": handleCompletions,
  "/v1/responses": handleResponses,
  "/v1/messages": handleMessages,
  "/v1/messages/count_tokens": handleCountTokens,
};

/**
 * The request target as a URL, or undefined when it is not one. Node accepts targets such as `//[` or `/\\` that the
 * WHATWG parser refuses; those must become a 400, never an exception that escapes the handler.
 */
function requestUrl(target: string | undefined): URL | undefined {
  try {
    return new URL(target ?? "/", "http://rlgate.local");
  } catch {
    return undefined;
  }
}

/** Anthropic's routes answer errors in Anthropic's shape; every other route in OpenAI's. Never throws. */
function errorShapeOf(target: string | undefined): ErrorShape {
  const url = requestUrl(target);
  if (!url) return "openai";
  const { routePath } = splitRolloutPath(url.pathname);
  return routePath === "/v1/messages" || routePath.startsWith("/v1/messages/") ? "anthropic" : "openai";
}

export function createGatewayServer(ctx: GatewayContext): { server: Server; passthrough: Passthrough } {
  const passthrough = new Passthrough(ctx);
  const lookup = {
    rolloutExists: (id: string) => ctx.store.getRollout(id) !== undefined,
    rolloutIdForKey: (key: string) => ctx.store.rolloutIdForKey(key),
  };

  async function route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const startEpoch = Date.now();
    const startPerf = performance.now();
    const url = requestUrl(req.url);
    if (!url) throw new GatewayError("RLGATE_BAD_REQUEST", "the request target is not a valid path");
    const path = url.pathname;

    if (path === "/healthz") return sendText(res, 200, "ok\n");
    if (path === "/metrics") {
      const text = await ctx.metrics.registry.metrics();
      res.writeHead(200, { "content-type": ctx.metrics.registry.contentType });
      res.end(text);
      return;
    }
    if (path === "/api" || path.startsWith("/api/")) return handleControlApi(ctx, req, res, url);

    const { routePath } = splitRolloutPath(path);
    const surface = req.method === "POST" ? SURFACES[routePath] : undefined;
    if (surface) {
      const attribution = attribute(path, req.headers, lookup);
      const rawBody = await readBody(req, ctx.config.bodyLimitBytes);
      const body = parseJsonBody(rawBody);
      return surface(ctx, { req, res, attribution, body, rawBody, startEpoch, startPerf });
    }
    if (isPassthroughPath(routePath)) {
      const attribution = attribute(path, req.headers, lookup);
      passthrough.forward(req, res, routePath, url.search, attribution.usedRolloutKey);
      return;
    }
    throw new GatewayError("RLGATE_NOT_FOUND", `no route ${req.method} ${path}`);
  }

  function answerError(req: IncomingMessage, res: ServerResponse, error: unknown): void {
    const gatewayError = asGatewayError(error);
    if (gatewayError.code === "RLGATE_INTERNAL") ctx.log.error({ err: error, method: req.method, url: req.url }, "internal error answered 500");
    ctx.metrics.errors.inc({ code: gatewayError.code });
    if (res.headersSent) {
      res.destroy();
      return;
    }
    const body = toErrorBody(gatewayError, errorShapeOf(req.url));
    res.writeHead(gatewayError.status, {
      "content-type": "application/json",
      "content-length": Buffer.byteLength(body),
    });
    res.end(body);
    // Unread request bodies (e.g. refused as too large) are drained so the connection can be reused.
    if (!req.complete) req.resume();
  }

  const server = createServer({ keepAliveTimeout: 65_000 }, (req, res) => {
    route(req, res).catch((error: unknown) => {
      try {
        answerError(req, res, error);
      } catch (secondError) {
        // An error while answering an error still answers, and is logged with its stack.
        ctx.log.error({ err: secondError, method: req.method, url: req.url }, "error while answering an error");
        if (res.headersSent) res.destroy();
        else res.writeHead(500, { "content-type": "application/json" }).end(LAST_RESORT_ERROR);
      }
    });
  });
  return { server, passthrough };
}

const LAST_RESORT_ERROR =
  '{"error":{"message":"internal error","type":"internal_error","param":null,"code":"RLGATE_INTERNAL"}}';

function sendText(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, { "content-type": "text/plain; charset=utf-8" });
  res.end(text);
}
