// The gateway's HTTP server: routes each request to a capture surface, the control API, metrics/health, or the
// pass-through to the upstream. Errors become the harness API's own error shape here, in one place.
import { createServer, STATUS_CODES, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import { checkControlToken, checkHarnessAccess, finishedRolloutError } from "./access.ts";
import { attribute, splitRolloutPath } from "./attribution.ts";
import { answerFromBackbone } from "./branching/index.ts";
import { parseJsonBody, readBody } from "./body.ts";
import { isRecordedRejection, recordRejected, type RejectedRequest } from "./capture/rejected-call.ts";
import type { GatewayContext } from "./context.ts";
import { handleControlApi } from "./control-api.ts";
import { GatewayError, asGatewayError, toErrorBody, toOpenAIErrorBody, type ErrorShape } from "./errors.ts";
import { Passthrough } from "./passthrough.ts";
import { redactSecrets, scrubQuery, withoutQueryParameter } from "./secrets.ts";
import { describeGeminiModel } from "./surfaces/gemini/index.ts";
import { geminiRoute, isGeminiPath } from "./surfaces/gemini/route.ts";
import { errorShapeOfRoute, surfaceFor } from "./surfaces/index.ts";
import { createUiRoutes } from "../ui/route.ts";
import { parseRequestTarget, RequestTargetError } from "../util/request-target.ts";

/** What a harness's connectivity check (GET or HEAD on its base URL) is answered with. */
const BASE_URL_ROUTES = new Set(["/", "/v1", "/v1/"]);

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

/**
 * The request target every route below reads, refused (400) when a URL parser would rewrite its path: routing on a
 * normalized path would let `/r/{id}/../../api/…` reach the control API.
 */
function routedUrl(target: string | undefined): URL {
  try {
    return parseRequestTarget(target).url;
  } catch (error) {
    if (!(error instanceof RequestTargetError)) throw error;
    throw new GatewayError("RLGATE_BAD_PATH", `${error.message}: ${String(target).slice(0, 200)}`);
  }
}

/** The error shape of the API a request's route belongs to (surfaces/index.ts). Never throws. */
function errorShapeOf(target: string | undefined): ErrorShape {
  const url = requestUrl(target);
  return url ? errorShapeOfRoute(splitRolloutPath(url.pathname).routePath) : "openai";
}

export function createGatewayServer(ctx: GatewayContext): { server: Server; passthrough: Passthrough } {
  const passthrough = new Passthrough(ctx);
  const ui = createUiRoutes({
    events: ctx.store.events,
    relayed: ctx.cluster?.uiEvents,
    reports: ctx.store,
    token: ctx.config.controlToken,
  });
  const lookup = {
    rolloutExists: (id: string) => ctx.store.getRollout(id) !== undefined,
    rolloutIdForKey: (key: string) => ctx.store.rolloutIdForKey(key),
  };

  async function route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const startEpoch = Date.now();
    const startPerf = performance.now();
    // A secret in the query goes no further than here: not upstream, not into a call's record.
    const url = routedUrl(req.url);
    // Gemini clients may send their key as `?key=`: a rollout key there attributes the call, then goes like any secret.
    const queryKey = isGeminiPath(splitRolloutPath(url.pathname).routePath) ? url.searchParams.get("key") : null;
    const search = url.search && scrubQuery(url.search, ctx.config.controlToken);
    if (search !== url.search) req.url = url.pathname + search;
    const path = url.pathname;
    const harnessAccess = () => checkHarnessAccess(ctx, req, attribute(path, req.headers, lookup, queryKey));

    if (path === "/healthz") return sendText(res, 200, "ok\n");
    if (path === "/metrics") {
      if (!ctx.config.metricsPublic) checkControlToken(ctx, req, "/metrics");
      // A worker of `serve --workers N` answers with every worker's figures, summed by the primary.
      const { text, contentType } = ctx.cluster
        ? await ctx.cluster.metrics()
        : { text: await ctx.metrics.registry.metrics(), contentType: ctx.metrics.registry.contentType };
      res.writeHead(200, { "content-type": contentType });
      res.end(text);
      return;
    }
    if (ui.matches(path)) return ui.handle(req, res, url);
    if (path === "/api" || path.startsWith("/api/")) return handleControlApi(ctx, req, res, url);

    const { rolloutId, routePath } = splitRolloutPath(path);
    const surface = surfaceFor(req.method, routePath);
    if (surface) {
      const attribution = harnessAccess();
      // A Google API key in the query is the harness's credential: not part of the call's recorded path.
      if (surface.api === "gemini") req.url = withoutQueryParameter(req.url ?? path, "key");
      const request: RejectedRequest = {
        rolloutId: attribution.rolloutId,
        api: surface.api,
        path: req.url ?? path,
        rawBody: null,
        body: undefined,
        startEpoch,
        startPerf,
      };
      try {
        // Redacted before anything reads it: neither the upstream nor the store sees a secret a body carried.
        const rawBody = (request.rawBody = redactSecrets(await readBody(req, ctx.config.bodyLimitBytes), ctx.secrets));
        const finished = finishedRolloutError(ctx, attribution);
        if (finished) {
          request.body = parseJsonBodyOrUndefined(rawBody);
          await recordRejected(ctx, request, finished, toErrorBody(finished, errorShapeOf(req.url)), {
            finished: true,
          });
          throw finished;
        }
        const body = (request.body = parseJsonBody(rawBody));
        const call = { req, res, attribution, body, rawBody, startEpoch, startPerf };
        // A branch rollout's calls before its decision point are answered from its backbone (gateway/branching).
        const branchCall = surface.branchView?.(call) ?? call;
        if (surface.replayable && (await answerFromBackbone(ctx, branchCall, surface.api))) return;
        return await surface.handle(ctx, call);
      } catch (error) {
        // A refused request is recorded on its open rollout (committed before the harness hears of it), then answered.
        const refusal = asGatewayError(error);
        if (!res.headersSent && isRecordedRejection(refusal)) {
          await recordRejected(ctx, request, refusal, toErrorBody(refusal, errorShapeOf(req.url))).catch(
            (failure: unknown) => ctx.log.error({ err: failure }, "could not record a rejected call"),
          );
        }
        throw refusal;
      }
    }
    // Harnesses check their base URL before the first call (Claude Code: HEAD /r/{id}); it answers for its rollout.
    if ((req.method === "GET" || req.method === "HEAD") && rolloutId !== null && BASE_URL_ROUTES.has(routePath)) {
      const attribution = harnessAccess();
      const body = JSON.stringify({ object: "rlgate.rollout", id: attribution.rolloutId, ok: true });
      res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
      res.end(req.method === "HEAD" ? undefined : body);
      return;
    }
    const geminiModel = geminiRoute(req.method, routePath);
    if (geminiModel?.method === "get") {
      harnessAccess();
      return describeGeminiModel(ctx, { res }, geminiModel.model);
    }
    if (ctx.config.passthrough.allows(req.method, routePath)) {
      const attribution = harnessAccess();
      const finished = finishedRolloutError(ctx, attribution);
      if (finished) throw finished;
      return passthrough.forward(req, res, routePath, search, attribution.usedRolloutKey);
    }
    throw new GatewayError(
      "RLGATE_NOT_FOUND",
      `no route ${req.method} ${path}: harnesses reach the captured APIs and, of the upstream's other routes, only ` +
        `${ctx.config.passthrough.specs.join(", ")} (rlgate serve --passthrough 'METHOD /path' adds one)`,
    );
  }

  function answerError(req: IncomingMessage, res: ServerResponse, error: unknown): void {
    const gatewayError = asGatewayError(error);
    if (gatewayError.code === "RLGATE_INTERNAL")
      ctx.log.error({ err: error, method: req.method, url: req.url }, "internal error answered 500");
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

  // A request without a Host header is answered by the router like any other (Node's own refusal is an empty 400).
  const server = createServer({ keepAliveTimeout: 65_000, requireHostHeader: false }, (req, res) => {
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
  // Node's own HTTP parser refuses some requests before any handler runs (an unknown method, raw bytes in the path,
  // headers too large): they are answered in JSON too, and the connection is closed.
  server.on("clientError", (error: NodeJS.ErrnoException, socket: Duplex) => {
    ctx.metrics.errors.inc({ code: `http_${error.code ?? "unknown"}` });
    const inFlight = (socket as Duplex & { _httpMessage?: ServerResponse })._httpMessage;
    if (error.code === "ECONNRESET" || !socket.writable || inFlight?.headersSent) {
      socket.destroy();
      return;
    }
    const gatewayError = parserError(error);
    const body = toOpenAIErrorBody(gatewayError);
    socket.end(
      `HTTP/1.1 ${gatewayError.status} ${STATUS_CODES[gatewayError.status] ?? "Error"}\r\n` +
        `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
    );
  });
  // `Expect: 100-continue` is answered by Node itself (a 100, then the request); any other expectation fails, in JSON.
  server.on("checkExpectation", (req: IncomingMessage, res: ServerResponse) => {
    const body = toErrorBody(
      new GatewayError(
        "RLGATE_EXPECTATION_FAILED",
        `unsupported expectation '${String(req.headers["expect"]).slice(0, 100)}'; only 100-continue is`,
      ),
      errorShapeOf(req.url),
    );
    res.writeHead(417, {
      "content-type": "application/json",
      "content-length": Buffer.byteLength(body),
      connection: "close",
    });
    res.end(body);
    req.resume();
  });
  return { server, passthrough };
}

/** The gateway error for a request Node's HTTP parser refused. */
function parserError(error: NodeJS.ErrnoException): GatewayError {
  if (error.code === "HPE_HEADER_OVERFLOW") {
    return new GatewayError("RLGATE_HEADERS_TOO_LARGE", "the request's headers are larger than the server accepts");
  }
  if (error.code === "ERR_HTTP_REQUEST_TIMEOUT") {
    return new GatewayError("RLGATE_REQUEST_TIMEOUT", "the request did not arrive in time");
  }
  return new GatewayError(
    "RLGATE_BAD_REQUEST",
    `malformed HTTP request (${error.code ?? "parse error"}): ${(error as { reason?: string }).reason ?? error.message}`,
  );
}

const LAST_RESORT_ERROR =
  '{"error":{"message":"internal error","type":"internal_error","param":null,"code":"RLGATE_INTERNAL"}}';

/** The body as JSON when it is JSON: a refused call keeps what it sent either way (see rejected-call.ts). */
function parseJsonBodyOrUndefined(raw: Buffer): unknown {
  try {
    return parseJsonBody(raw);
  } catch {
    return undefined;
  }
}

function sendText(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, { "content-type": "text/plain; charset=utf-8" });
  res.end(text);
}
