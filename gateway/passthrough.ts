// Routes rlgate does not capture (/v1/models, /v1/embeddings, /tokenize, ...) go to the upstream unchanged.
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
      target: ctx.upstream.origin,
      changeOrigin: true,
      xfwd: false,
      proxyTimeout: ctx.upstream.headersTimeoutMs,
    });
    this.#proxy.on("error", (error, _req, res) => {
      const response = res as ServerResponse;
      if (!response.headersSent && typeof response.writeHead === "function") {
        const body = toOpenAIErrorBody(
          new GatewayError("RLGATE_UPSTREAM_UNREACHABLE", `the upstream could not be reached: ${error.message}`),
        );
        response.writeHead(502, { "content-type": "application/json" });
        response.end(body);
      } else {
        response.destroy?.();
      }
    });
  }

  forward(
    req: IncomingMessage,
    res: ServerResponse,
    routePath: string,
    query: string,
    dropAuthorization: boolean,
  ): void {
    this.#ctx.metrics.passthrough.inc();
    req.url = this.#ctx.upstream.basePath + routePath + query;
    scrubPassthroughHeaders(req.headers, dropAuthorization);
    if (req.headers["authorization"] === undefined && this.#ctx.upstream.apiKey)
      req.headers["authorization"] = `Bearer ${this.#ctx.upstream.apiKey}`;
    this.#proxy.web(req, res);
  }

  close(): void {
    this.#proxy.close();
  }
}
