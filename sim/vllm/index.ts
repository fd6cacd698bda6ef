// The vLLM flavour: vLLM's OpenAI-compatible routes and its error shapes (FastAPI's for unknown routes).
import { fastApiRoutes, type RouteTable } from "../fastapi.ts";
import type { SimFlavor } from "../flavor.ts";
import type { SimHttpError } from "../reply.ts";
import { chatCompletions } from "./chat.ts";
import { completions } from "./completions.ts";
import { detokenize, health, models, tokenize, version } from "./misc.ts";

const ROUTES: RouteTable = {
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
  ...fastApiRoutes(ROUTES),
  isGeneration: (path) => GENERATION.has(path),
  errorBody: (error: SimHttpError) => ({
    error: { message: error.message, type: error.errorType, param: error.param, code: error.status },
  }),
};
