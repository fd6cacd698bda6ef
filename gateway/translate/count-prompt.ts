// Token counting for translated APIs (Anthropic's count_tokens, Gemini's countTokens): the request is translated as
// its generating route would translate it, and its prompt is counted with the real tokenizer and chat template — by
// the upstream's `/tokenize` (vLLM takes chat messages and tools there), or, where the upstream has no such route
// (SGLang), locally with the Qwen3 tokenizer and template rlgate ships (exact for Qwen3 models only). The
// `x-rlgate-token-count` header says which. Nothing is recorded: no tokens are generated.
import type { GatewayContext } from "../context.ts";
import { GatewayError, upstreamErrorBody, type ErrorShape } from "../errors.ts";
import { forward } from "../forward.ts";
import { parseJsonObject, type HarnessCall } from "../relay/exchange.ts";
import type { Json } from "../upstream/fields.ts";
import { renderChatIds, type ChatMessage } from "../../tokenizer/chat-template.ts";

type Counted = { count: number; by: "upstream" | "local-qwen3" } | { error: string; status: number };

export interface CountSpec {
  errorShape: ErrorShape;
  /** Harness headers of the API's own that do not travel upstream. */
  omitHeader: (name: string) => boolean;
  /** The API's answer for a count. */
  body: (count: number) => Json;
}

function thinkingOf(chat: Json): boolean | undefined {
  const kwargs = chat["chat_template_kwargs"] as Json | undefined;
  return typeof kwargs?.["enable_thinking"] === "boolean" ? kwargs["enable_thinking"] : undefined;
}

async function countUpstream(
  ctx: GatewayContext,
  call: HarnessCall,
  chat: Json,
  spec: CountSpec,
): Promise<Counted | null> {
  const body: Json = { model: chat["model"], messages: chat["messages"], add_generation_prompt: true };
  if (chat["tools"]) body["tools"] = chat["tools"];
  if (chat["chat_template_kwargs"]) body["chat_template_kwargs"] = chat["chat_template_kwargs"];
  const headers = Object.fromEntries(Object.entries(call.req.headers).filter(([name]) => !spec.omitHeader(name)));
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
  const status = res.statusCode === 200 ? 502 : res.statusCode;
  return { error: upstreamErrorBody(spec.errorShape, status, parsed ?? text), status };
}

function countLocally(chat: Json): Counted {
  const ids = renderChatIds(chat["messages"] as ChatMessage[], {
    tools: chat["tools"] as unknown[] | undefined,
    enableThinking: thinkingOf(chat),
  });
  return { count: ids.length, by: "local-qwen3" };
}

/** Counts the prompt of `chat` (the served model's name in it) and answers the harness. */
export async function answerPromptCount(
  ctx: GatewayContext,
  call: HarnessCall,
  chat: Json,
  spec: CountSpec,
): Promise<void> {
  const counted =
    (ctx.flavor.name === "vllm" ? await countUpstream(ctx, call, chat, spec) : null) ?? countLocally(chat);
  const body = "error" in counted ? counted.error : JSON.stringify(spec.body(counted.count));
  const headers: Record<string, string | number> = {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(body),
  };
  if ("by" in counted) headers["x-rlgate-token-count"] = counted.by;
  call.res.writeHead("error" in counted ? counted.status : 200, headers);
  call.res.end(body);
}
