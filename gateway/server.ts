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

/** Anthropic's routes answer errors in Anthropic's shape; every other route in OpenAI's. */
function errorShapeOf(url: string | undefined): ErrorShape {
  const { routePath } = splitRolloutPath(new URL(url ?? "/", "http://rlgate.local").pathname);
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
    const url = new URL(req.url ?? "/", "http://rlgate.local");
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

  const server = createServer({ keepAliveTimeout: 65_000 }, (req, res) => {
    route(req, res).catch((error: unknown) => {
      const gatewayError = asGatewayError(error);
      if (gatewayError.code === "RLGATE_INTERNAL") ctx.log(`internal error: ${(error as Error).stack ?? error}`);
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
    });
  });
  return { server, passthrough };
}

function sendText(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, { "content-type": "text/plain; charset=utf-8" });
  res.end(text);
}
