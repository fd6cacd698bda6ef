// POST /v1/messages/count_tokens: the request is translated as /v1/messages would translate it and its prompt is
// counted with the real tokenizer and chat template — by the upstream's `/tokenize` (vLLM takes chat messages and
// tools there), or, where the upstream has no such route (SGLang), locally with the Qwen3 tokenizer and template
// rlgate ships (exact for Qwen3 models only). The `x-rlgate-token-count` header says which. Nothing is recorded:
// no tokens are generated.
import type { GatewayContext } from "../../context.ts";
import { GatewayError, upstreamErrorBody } from "../../errors.ts";
import { forward } from "../../forward.ts";
import { parseJsonObject, type HarnessCall } from "../../relay/exchange.ts";
import type { Json } from "../../upstream/fields.ts";
import { renderChatIds, type ChatMessage } from "../../../tokenizer/chat-template.ts";
import { withServedModel } from "../../upstream/model-map.ts";
import { isAnthropicHeader } from "./index.ts";
import { parseMessagesRequest, toChatRequest } from "./request.ts";

type Counted = { count: number; by: "upstream" | "local-qwen3" } | { error: string; status: number };

function thinkingOf(chat: Json): boolean | undefined {
  const kwargs = chat["chat_template_kwargs"] as Json | undefined;
  return typeof kwargs?.["enable_thinking"] === "boolean" ? kwargs["enable_thinking"] : undefined;
}

async function countUpstream(ctx: GatewayContext, call: HarnessCall, chat: Json): Promise<Counted | null> {
  const body: Json = { model: chat["model"], messages: chat["messages"], add_generation_prompt: true };
  if (chat["tools"]) body["tools"] = chat["tools"];
  if (chat["chat_template_kwargs"]) body["chat_template_kwargs"] = chat["chat_template_kwargs"];
  const headers = Object.fromEntries(Object.entries(call.req.headers).filter(([name]) => !isAnthropicHeader(name)));
  let res;
  let text: string;
  try {
    res = await forward(
      ctx,
      { path: "/tokenize", headers, dropAuthorization: call.attribution.usedRolloutKey },
      JSON.stringify(body),
    );
    text = (await res.readAll()).toString("utf8");
  } catch (error) {
    throw new GatewayError(
      "RLGATE_UPSTREAM_UNREACHABLE",
      `the upstream could not be reached: ${(error as Error).message}`,
      { cause: error },
    );
  }
  if (res.statusCode === 404 || res.statusCode === 405) return null;
  const parsed = parseJsonObject(text);
  if (res.statusCode === 200 && typeof parsed?.["count"] === "number")
    return { count: parsed["count"], by: "upstream" };
  return {
    error: upstreamErrorBody("anthropic", res.statusCode === 200 ? 502 : res.statusCode, parsed ?? text),
    status: res.statusCode === 200 ? 502 : res.statusCode,
  };
}

function countLocally(chat: Json): Counted {
  const ids = renderChatIds(chat["messages"] as ChatMessage[], {
    tools: chat["tools"] as unknown[] | undefined,
    enableThinking: thinkingOf(chat),
  });
  return { count: ids.length, by: "local-qwen3" };
}

export async function handleCountTokens(ctx: GatewayContext, call: HarnessCall): Promise<void> {
  const request = parseMessagesRequest(call.body, { countOnly: true });
  const chat = withServedModel(ctx.modelMap, toChatRequest({ ...request, stream: false }));
  const counted = (ctx.flavor.name === "vllm" ? await countUpstream(ctx, call, chat) : null) ?? countLocally(chat);
  const body = "error" in counted ? counted.error : JSON.stringify({ input_tokens: counted.count });
  const headers: Record<string, string | number> = {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(body),
  };
  if ("by" in counted) headers["x-rlgate-token-count"] = counted.by;
  call.res.writeHead("error" in counted ? counted.status : 200, headers);
  call.res.end(body);
}
