// vLLM's small routes: models, health, version, tokenize and detokenize.
import { templateReasoning } from "../../tokenizer/reasoning-field.ts";
import type { ChatMessage } from "../../tokenizer/chat-template.ts";
import { simFormat, simVocabSize } from "../sim-format.ts";
import type { HandlerInput } from "../flavor.ts";
import { chatPrompt, encodeCached } from "../prompt.ts";
import { badRequest, type Reply } from "../reply.ts";
import { VLLM_VERSION, checkModel, randomId, validateIds } from "./common.ts";
import { detokenizeRequest, parseBody, tokenizeChatRequest, tokenizeTextRequest } from "./requests.ts";

const started = Math.floor(Date.now() / 1000);

export function models({ ctx }: HandlerInput): Reply {
  const body = {
    object: "list",
    data: [
      {
        id: ctx.model,
        object: "model",
        created: Math.floor(Date.now() / 1000),
        owned_by: "vllm",
        root: ctx.model,
        parent: null,
        max_model_len: ctx.maxModelLen,
        permission: [
          {
            id: `modelperm-${randomId()}`,
            object: "model_permission",
            created: started,
            allow_create_engine: false,
            allow_sampling: true,
            allow_logprobs: true,
            allow_search_indices: false,
            allow_view: true,
            allow_fine_tuning: false,
            organization: "*",
            group: null,
            is_blocking: false,
          },
        ],
      },
    ],
  };
  return { kind: "json", status: 200, body };
}

export function health(): Reply {
  return { kind: "json", status: 200, body: undefined };
}

export function version(): Reply {
  return { kind: "json", status: 200, body: { version: VLLM_VERSION } };
}

export function tokenize({ body, ctx }: HandlerInput): Reply {
  const isChat = typeof body === "object" && body !== null && "messages" in body;
  let tokens: number[];
  let strs: boolean;
  if (isChat) {
    const req = parseBody(tokenizeChatRequest, body);
    checkModel(req.model, ctx);
    strs = req.return_token_strs === true;
    if (req.continue_final_message) throw badRequest("rlgate sim does not support continue_final_message");
    const thinking = req.chat_template_kwargs?.["enable_thinking"];
    try {
      tokens = chatPrompt({
        messages: templateReasoning(req.messages as unknown as ChatMessage[], ctx.reasoningField ?? "reasoning"),
        tools: req.tools?.length ? req.tools : undefined,
        enableThinking: typeof thinking === "boolean" ? thinking : undefined,
        addGenerationPrompt: req.add_generation_prompt ?? true,
        template: ctx.chatTemplate,
        format: simFormat(ctx),
      }).ids;
    } catch (cause) {
      throw badRequest((cause as Error).message, cause);
    }
  } else {
    const req = parseBody(tokenizeTextRequest, body);
    checkModel(req.model, ctx);
    strs = req.return_token_strs === true;
    tokens = encodeCached(req.prompt, simFormat(ctx));
  }
  const format = simFormat(ctx);
  const body2 = {
    count: tokens.length,
    max_model_len: ctx.maxModelLen,
    tokens,
    token_strs: strs ? tokens.map((id) => format.tokenPiece(id)) : null,
  };
  return { kind: "json", status: 200, body: body2 };
}

export function detokenize({ body, ctx }: HandlerInput): Reply {
  const req = parseBody(detokenizeRequest, body);
  checkModel(req.model, ctx);
  validateIds(req.tokens, simVocabSize(ctx));
  return { kind: "json", status: 200, body: { prompt: simFormat(ctx).decode(req.tokens) } };
}
