// The SGLang flavour: SGLang's OpenAI-compatible routes, its token-id fields and its error shape
// (`{object:"error", message, type, param, code}`; FastAPI's `{detail}` for unknown routes).
import { fastApiRoutes, type RouteTable } from "../fastapi.ts";
import type { HandlerInput, SimFlavor } from "../flavor.ts";
import type { Reply, SimHttpError } from "../reply.ts";
import { health } from "../vllm/misc.ts";
import { sglangChat } from "./chat.ts";
import { sglangCompletions } from "./completions.ts";

function models({ ctx }: HandlerInput): Reply {
  const card = {
    id: ctx.model,
    object: "model",
    created: Math.floor(Date.now() / 1000),
    owned_by: "sglang",
    root: ctx.model,
    parent: null,
    max_model_len: ctx.maxModelLen,
  };
  return { kind: "json", status: 200, body: { object: "list", data: [card] } };
}

function modelInfo({ ctx }: HandlerInput): Reply {
  return { kind: "json", status: 200, body: { model_path: ctx.model, tokenizer_path: ctx.model, is_generation: true } };
}

const ROUTES: RouteTable = {
  "/v1/chat/completions": { POST: sglangChat },
  "/v1/completions": { POST: sglangCompletions },
  "/v1/models": { GET: models },
  "/health": { GET: health },
  "/get_model_info": { GET: modelInfo },
};

const GENERATION = new Set(["/v1/chat/completions", "/v1/completions"]);

export const sglangFlavor: SimFlavor = {
  name: "sglang",
  ...fastApiRoutes(ROUTES),
  isGeneration: (path) => GENERATION.has(path),
  errorBody: (error: SimHttpError) => ({
    object: "error",
    message: error.message,
    type: error.errorType,
    param: error.param,
    code: error.status,
  }),
};
