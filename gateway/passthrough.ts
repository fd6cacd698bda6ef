// Routes rlgate does not capture but allows (gateway/passthrough-routes.ts: /v1/models, /tokenize, ...) go to the
// upstream unchanged but for secrets (gateway/secrets.ts), each to the replica with the fewest requests in flight; a
// GET that a replica refused goes to another one.
import type { IncomingMessage, ServerResponse } from "node:http";
import httpProxy from "http-proxy";
import type { GatewayContext } from "./context.ts";
import { GatewayError, toOpenAIErrorBody } from "./errors.ts";
import { readBody } from "./body.ts";
import { scrubPassthroughHeaders } from "./headers.ts";
import { redactSecrets } from "./secrets.ts";
import { Readable } from "node:stream";
import type { Replica } from "./upstream/replica.ts";
import { isConnectFailure } from "./upstream/replica-attempt.ts";

/** What the passthrough reads of its gateway: where to send, what to count, which secrets to keep back. */
export type PassthroughContext = Pick<GatewayContext, "upstream" | "metrics" | "config" | "secrets">;

export class Passthrough {
  readonly #proxy: httpProxy;
  readonly #ctx: PassthroughContext;

  constructor(ctx: PassthroughContext) {
    this.#ctx = ctx;
    this.#proxy = httpProxy.createProxyServer({
      changeOrigin: true,
      xfwd: false,
      proxyTimeout: ctx.upstream.headersTimeoutMs,
    });
    // Each request has its own error handler (below); this one catches what http-proxy emits outside them.
    this.#proxy.on("error", (_error, _req, res) => (res as ServerResponse).destroy?.());
  }

  async forward(
    req: IncomingMessage,
    res: ServerResponse,
    routePath: string,
    query: string,
    dropAuthorization: boolean,
  ): Promise<void> {
    const { upstream, metrics, config, secrets } = this.#ctx;
    metrics.passthrough.inc();
    scrubPassthroughHeaders(req.headers, dropAuthorization, config.controlToken);
    if (req.headers["authorization"] === undefined && upstream.apiKey)
      req.headers["authorization"] = `Bearer ${upstream.apiKey}`;
    // A body is read whole so that no secret in it travels (redacted in place: its length, and so its headers, hold).
    const bodyless = req.method === "GET" || req.method === "HEAD";
    const body = bodyless ? null : redactSecrets(await readBody(req, config.bodyLimitBytes), secrets);
    this.#send(req, res, routePath + query, upstream.pick(null)!, new Set(), body);
  }

  #send(
    req: IncomingMessage,
    res: ServerResponse,
    route: string,
    replica: Replica,
    tried: Set<Replica>,
    body: Buffer | null,
  ): void {
    const { upstream } = this.#ctx;
    tried.add(replica);
    const done = upstream.track(replica);
    req.url = replica.basePath + route;
    const onClose = () => done(res.statusCode >= 500 && res.headersSent ? `HTTP ${res.statusCode}` : null);
    res.once("close", onClose);
    // A request without a body (GET /v1/models, the usual case) can be sent again: from an empty stream, as the
    // harness's own request stream was read once already.
    const bodyless = body === null;
    const buffer = body !== null ? Readable.from([body]) : tried.size > 1 ? Readable.from([]) : null;
    const options = { target: replica.origin, ...(buffer ? { buffer } : {}) };
    this.#proxy.web(req, res, options, (error) => {
      res.off("close", onClose);
      done(error.message, error);
      const next = bodyless && isConnectFailure(error) && !res.headersSent ? upstream.pick(null, tried) : null;
      if (next) return this.#send(req, res, route, next, tried, body);
      if (!res.headersSent && typeof res.writeHead === "function") {
        const body = toOpenAIErrorBody(
          new GatewayError("RLGATE_UPSTREAM_UNREACHABLE", `the upstream could not be reached: ${error.message}`),
        );
        res.writeHead(502, { "content-type": "application/json" });
        res.end(body);
      } else {
        res.destroy?.();
      }
    });
  }

  close(): void {
    this.#proxy.close();
  }
}
