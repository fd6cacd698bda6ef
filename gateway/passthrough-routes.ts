// Which upstream routes a harness may reach through the gateway without capture. An allow-list, not a prefix: the
// upstream serves admin routes beside inference ones (vLLM's /v1/load_lora_adapter changes the shared model, /pause,
// /sleep, /reset_prefix_cache; SGLang's /update_weights_from_disk), and an agent holding a rollout's base URL must
// reach none of them. `rlgate serve --passthrough` adds routes a deployment needs.
import { parseRequestTarget, RequestTargetError } from "../util/request-target.ts";

/** Read-only model and tokenizer routes harnesses and their SDKs call; inference itself is captured, not passed. */
export const DEFAULT_PASSTHROUGH_ROUTES: readonly string[] = [
  "GET /v1/models",
  "GET /v1/models/*",
  "POST /v1/embeddings",
  "POST /tokenize",
  "POST /detokenize",
  "GET /health",
  "GET /version",
  "GET /ping",
  "GET /get_model_info",
];

export class PassthroughRouteError extends Error {}

interface Route {
  /** Upper-case method, or null for any. GET allows HEAD too. */
  method: string | null;
  path: string;
  /** `PATH/*`: any path below PATH. */
  prefix: boolean;
}

const METHODS = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]);

/** One `[METHOD ]/path[/*]` spec, checked. */
function parseRoute(spec: string): Route {
  const parts = spec.trim().split(/\s+/);
  if (parts.length > 2 || parts[0] === "")
    throw new PassthroughRouteError(`'${spec}': a route is '[METHOD ]/path' or '[METHOD ]/path/*'`);
  const method = parts.length === 2 ? parts[0]!.toUpperCase() : null;
  if (method !== null && !METHODS.has(method)) throw new PassthroughRouteError(`'${spec}': unknown method ${method}`);
  let path = parts.at(-1)!;
  const prefix = path.endsWith("/*");
  if (prefix) path = path.slice(0, -2);
  try {
    parseRequestTarget(path);
  } catch (error) {
    if (error instanceof RequestTargetError) throw new PassthroughRouteError(`'${spec}': ${error.message}`);
    throw error;
  }
  if (path.includes("?") || path === "/" || path.endsWith("/"))
    throw new PassthroughRouteError(`'${spec}': name a route, e.g. 'POST /v1/audio/transcriptions' or 'GET /v2/*'`);
  return { method, path, prefix };
}

export class PassthroughRoutes {
  readonly #routes: Route[];
  /** The routes as given (defaults first), for --help, errors and the banner. */
  readonly specs: readonly string[];

  /** The defaults plus `extra` (`--passthrough`); throws PassthroughRouteError naming a malformed spec. */
  constructor(extra: readonly string[] = []) {
    this.specs = [...DEFAULT_PASSTHROUGH_ROUTES, ...extra.map((spec) => spec.trim()).filter(Boolean)];
    this.#routes = this.specs.map(parseRoute);
  }

  allows(method: string | undefined, routePath: string): boolean {
    const m = (method ?? "GET").toUpperCase();
    return this.#routes.some(
      (route) =>
        (route.method === null || route.method === m || (route.method === "GET" && m === "HEAD")) &&
        (route.prefix
          ? routePath.startsWith(`${route.path}/`) && routePath.length > route.path.length + 1
          : routePath === route.path),
    );
  }
}
