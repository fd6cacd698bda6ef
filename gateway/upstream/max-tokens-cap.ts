// `serve --max-tokens-cap auto|N`: harnesses ask for more output than a served model's context leaves (Qwen Code
// 32768, Claude Code 32000, on top of a 17k–27k-token prompt), which vLLM refuses with a 400. The cap lowers the
// harness's max_tokens before the call goes upstream — to N, or (auto) to the model's context length minus the
// prompt — and the call records what was asked and what was sent. The context length is the upstream's own
// (/v1/models `max_model_len`, read once: prompts/context-length.ts); the prompt is counted by the upstream's
// /tokenize only when a cheap over-estimate (the messages' and tools' UTF-8 bytes, plus the template's few tokens a
// message) does not fit.
import type { CallRecord } from "../../store/records.ts";
import type { GatewayContext } from "../context.ts";
import { upstreamContextLength } from "../prompts/context-length.ts";
import { isObject, type Json } from "./fields.ts";

export type MaxTokensCapSetting = "auto" | number | null;

/** Parses `auto` or a positive integer (the CLI's value). */
export function parseMaxTokensCap(value: string): MaxTokensCapSetting {
  if (value === "auto") return "auto";
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1)
    throw new Error(`--max-tokens-cap: expected 'auto' or a positive integer, got '${value}'`);
  return n;
}

const TEMPLATE_TOKENS_PER_MESSAGE = 16;
const TEMPLATE_TOKENS = 1024;

async function upstreamPost(ctx: Pick<GatewayContext, "upstream">, path: string, body: Json): Promise<Json | null> {
  try {
    const res = await ctx.upstream.request({
      method: "POST",
      path,
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    const value: unknown = await res.body.json();
    return res.statusCode === 200 && isObject(value) ? value : null;
  } catch {
    return null;
  }
}

/** The prompt's length in tokens: the cheap over-estimate when the request fits with it, else the upstream's count. */
async function promptTokens(
  ctx: Pick<GatewayContext, "upstream">,
  chat: Json,
  requested: number,
  context: number,
): Promise<{ tokens: number; exact: boolean }> {
  const messages = Array.isArray(chat["messages"]) ? chat["messages"] : [];
  const estimate =
    Buffer.byteLength(JSON.stringify([messages, chat["tools"] ?? null])) +
    messages.length * TEMPLATE_TOKENS_PER_MESSAGE +
    TEMPLATE_TOKENS;
  if (estimate + requested <= context) return { tokens: estimate, exact: false };
  const body: Json = { model: chat["model"], messages, add_generation_prompt: true };
  if (Array.isArray(chat["tools"])) body["tools"] = chat["tools"];
  if (isObject(chat["chat_template_kwargs"])) body["chat_template_kwargs"] = chat["chat_template_kwargs"];
  const counted = await upstreamPost(ctx, "/tokenize", body);
  return typeof counted?.["count"] === "number"
    ? { tokens: counted["count"], exact: true }
    : { tokens: estimate, exact: false };
}

/**
 * `chat` with its max_tokens (or max_completion_tokens) lowered by the gateway's cap, and what the call records;
 * the request itself when no cap applies. Never raises a value, never lowers it below 1.
 */
export async function capMaxTokens(
  ctx: Pick<GatewayContext, "upstream" | "config" | "log">,
  chat: Json,
): Promise<{ chat: Json; cap: CallRecord["maxTokensCap"] }> {
  const setting = ctx.config.maxTokensCap;
  const field = typeof chat["max_completion_tokens"] === "number" ? "max_completion_tokens" : "max_tokens";
  const requested = chat[field];
  if (setting == null || typeof requested !== "number") return { chat, cap: undefined };
  if (setting !== "auto") {
    if (requested <= setting) return { chat, cap: undefined };
    return {
      chat: { ...chat, [field]: setting },
      cap: { requested, sent: setting, contextLength: null, promptTokens: null },
    };
  }
  const context = await upstreamContextLength(ctx);
  if (context === null) {
    ctx.log.warn("--max-tokens-cap auto: the upstream's /v1/models reports no max_model_len; max_tokens is not capped");
    return { chat, cap: undefined };
  }
  const prompt = await promptTokens(ctx, chat, requested, context);
  const fits = Math.max(1, context - prompt.tokens);
  if (requested <= fits) return { chat, cap: undefined };
  return {
    chat: { ...chat, [field]: fits },
    cap: { requested, sent: fits, contextLength: context, promptTokens: prompt.exact ? prompt.tokens : null },
  };
}
