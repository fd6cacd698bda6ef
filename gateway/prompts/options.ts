// Which chat-completions fields a token-mode call carries to the upstream's /v1/completions, and which make it fall
// back to messages mode. Sampling options have the same name and meaning on both routes and travel as they are;
// options that need the server's chat layer (constrained tool choice, response formats, chat-level logprobs and ids
// the harness asked for itself, template switches other than thinking) cannot be honoured on a token prompt.
import { isObject, type Json } from "../upstream/fields.ts";

/** Fields that go to /v1/completions unchanged. */
const SAMPLING = new Set([
  "model",
  "stream",
  "stream_options",
  "n",
  "temperature",
  "top_p",
  "top_k",
  "min_p",
  "seed",
  "stop",
  "stop_token_ids",
  "presence_penalty",
  "frequency_penalty",
  "repetition_penalty",
  "logit_bias",
  "min_tokens",
  "ignore_eos",
  "include_stop_str_in_output",
  "user",
  "priority",
  "request_id",
]);

/** Fields the gateway itself acts on (rendering, parsing) or that change nothing the model sees. */
const HANDLED = new Set([
  "messages",
  "tools",
  "tool_choice",
  "chat_template_kwargs",
  "max_tokens",
  "max_completion_tokens",
  "include_reasoning",
  "parallel_tool_calls",
  "metadata",
  "store",
  // pi always sends it; gpt-oss's prompt says it (`Reasoning: …` in the system message, render.ts passes it on), the
  // other built-in families' templates read none of it.
  "reasoning_effort",
]);

/** Why a chat request cannot be served from tokens, or null when it can. */
export function fallbackReason(chat: Json): string | null {
  for (const [key, value] of Object.entries(chat)) {
    if (value === undefined || value === null) continue;
    if (SAMPLING.has(key) || HANDLED.has(key)) continue;
    if ((key === "logprobs" || key === "return_token_ids" || key === "echo") && value === false) continue;
    return `unsupported_option:${key}`;
  }
  const choice = chat["tool_choice"];
  if (choice != null && choice !== "auto" && choice !== "none") return "unsupported_option:tool_choice";
  const kwargs = chat["chat_template_kwargs"];
  if (kwargs != null) {
    if (!isObject(kwargs)) return "unsupported_option:chat_template_kwargs";
    for (const key of Object.keys(kwargs)) {
      if (key !== "enable_thinking" || typeof kwargs[key] !== "boolean")
        return `unsupported_option:chat_template_kwargs.${key}`;
    }
  }
  const messages = chat["messages"];
  if (!Array.isArray(messages)) return "unsupported_option:messages";
  for (const message of messages) {
    if (!isObject(message) || !Array.isArray(message["content"])) continue;
    for (const part of message["content"]) {
      if (!isObject(part) || (part["type"] !== "text" && part["type"] !== "input_text"))
        return "unsupported_content:non_text_part";
    }
  }
  return null;
}

export function enableThinkingOf(chat: Json): boolean | undefined {
  const kwargs = chat["chat_template_kwargs"];
  const value = isObject(kwargs) ? kwargs["enable_thinking"] : undefined;
  return typeof value === "boolean" ? value : undefined;
}

/** The /v1/completions body for a rendered prompt (max_tokens: the harness's, else the rest of the context). */
export function completionBody(chat: Json, promptIds: number[], maxTokens: number): Json {
  const body: Json = {};
  for (const key of SAMPLING) if (chat[key] !== undefined) body[key] = chat[key];
  body["prompt"] = promptIds;
  body["max_tokens"] = maxTokens;
  return body;
}

/** The harness's max_tokens, or null when it left the length to the server. */
export function requestedMaxTokens(chat: Json): number | null {
  const value = chat["max_completion_tokens"] ?? chat["max_tokens"];
  return typeof value === "number" ? value : null;
}
