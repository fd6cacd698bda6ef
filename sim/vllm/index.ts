// The vLLM flavour: vLLM's OpenAI-compatible routes and its error shapes (FastAPI's for unknown routes).
import type { RouteHandler, SimFlavor } from "../flavor.ts";
import type { SimHttpError } from "../reply.ts";
import { chatCompletions } from "./chat.ts";
import { completions } from "./completions.ts";
import { detokenize, health, models, tokenize, version } from "./misc.ts";

const ROUTES: Record<string, Partial<Record<string, RouteHandler>>> = {
  "/v1/chat/completions": { POST: chatCompletions },
  "/v1/completions": { POST: completions },
  "/v1/models": { GET: models },
  "/health": { GET: health },
  "/ping": { GET: health, POST: health },
  "/version": { GET: version },
  "/tokenize": { POST: tokenize },
  "/detokenize": { POST: detokenize },
};

const GENERATION = new Set(["/v1/chat/completions", "/v1/completions"]);

export const vllmFlavor: SimFlavor = {
  name: "vllm",
  route(method, path) {
    const methods = ROUTES[path];
    if (!methods) return undefined;
    return methods[method] ?? null;
  },
  isGeneration: (path) => GENERATION.has(path),
  notFound: () => ({ status: 404, body: { detail: "Not Found" } }),
  methodNotAllowed: () => ({ status: 405, body: { detail: "Method Not Allowed" } }),
  errorBody: (error: SimHttpError) => ({
    error: { message: error.message, type: error.errorType, param: error.param, code: error.status },
  }),
};
