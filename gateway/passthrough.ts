// Routes rlgate does not capture (/v1/models, /v1/embeddings, /tokenize, ...) go to the upstream unchanged, each to
// the replica with the fewest requests in flight.
import type { IncomingMessage, ServerResponse } from "node:http";
import httpProxy from "http-proxy";
import type { GatewayContext } from "./context.ts";
import { GatewayError, toOpenAIErrorBody } from "./errors.ts";
import { scrubPassthroughHeaders } from "./headers.ts";

/** Paths the upstream (vLLM, SGLang) serves that rlgate relays without capture. */
const PASSTHROUGH =
  /^\/(v1|v2)\/|^\/(tokenize|detokenize|health|version|ping|metrics\/upstream|get_model_info|get_server_info)$/;

export function isPassthroughPath(routePath: string): boolean {
  return PASSTHROUGH.test(routePath);
}

export class Passthrough {
  readonly #proxy: httpProxy;
  readonly #ctx: GatewayContext;

  constructor(ctx: GatewayContext) {
    this.#ctx = ctx;
    this.#proxy = httpProxy.createProxyServer({
      changeOrigin: true,
      xfwd: false,
      proxyTimeout: ctx.upstream.headersTimeoutMs,
    });
    // Each request has its own error handler (below); this one catches what http-proxy emits outside them.
    this.#proxy.on("error", (_error, _req, res) => (res as ServerResponse).destroy?.());
  }

  forward(
    req: IncomingMessage,
    res: ServerResponse,
    routePath: string,
    query: string,
    dropAuthorization: boolean,
  ): void {
    const { upstream, metrics } = this.#ctx;
    metrics.passthrough.inc();
    const replica = upstream.pick(null)!;
    const done = upstream.track(replica);
    req.url = replica.basePath + routePath + query;
    scrubPassthroughHeaders(req.headers, dropAuthorization);
    if (req.headers["authorization"] === undefined && upstream.apiKey)
      req.headers["authorization"] = `Bearer ${upstream.apiKey}`;
    res.once("close", () => done(res.statusCode >= 500 && res.headersSent ? `HTTP ${res.statusCode}` : null));
    this.#proxy.web(req, res, { target: replica.origin }, (error) => {
      done(error.message, error);
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
