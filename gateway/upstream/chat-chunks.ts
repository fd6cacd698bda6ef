// The stream a whole chat completion corresponds to: one role chunk per choice, its reasoning, its content, one chunk
// per tool call, a finish chunk (with the choice's logprobs), and the usage chunk when the harness asked for it.
// Chunks are written as SGLang writes them (pydantic dumps every field, nulls included), which any chat-completions
// client, and rlgate's own translators, read as the same message.
import { choicesOf, isObject, type Json } from "./fields.ts";

// The reasoning goes under the name the answer used: `reasoning` from vLLM >= 0.17, `reasoning_content` from SGLang
// and older vLLM (tokenizer/reasoning-field.ts).
function delta(fields: Json, reasoningKey: string): Json {
  return { role: null, content: null, [reasoningKey]: null, tool_calls: null, ...fields };
}

export function chatChunksFromResponse(response: Json, options: { includeUsage: boolean }): Json[] {
  const base = {
    id: response["id"],
    object: "chat.completion.chunk",
    created: response["created"],
    model: response["model"],
  };
  let reasoningKey = "reasoning_content";
  const chunk = (index: number, fields: Json, extra: Json = {}): Json => ({
    ...base,
    choices: [
      { index, delta: delta(fields, reasoningKey), logprobs: null, finish_reason: null, matched_stop: null, ...extra },
    ],
    usage: null,
  });
  const chunks: Json[] = [];
  choicesOf(response).forEach((choice, position) => {
    const index = typeof choice["index"] === "number" ? choice["index"] : position;
    const message = isObject(choice["message"]) ? choice["message"] : {};
    reasoningKey = "reasoning" in message && !("reasoning_content" in message) ? "reasoning" : "reasoning_content";
    chunks.push(chunk(index, { role: "assistant", content: "" }));
    const reasoning = message["reasoning_content"] ?? message["reasoning"];
    if (typeof reasoning === "string" && reasoning) chunks.push(chunk(index, { [reasoningKey]: reasoning }));
    if (typeof message["content"] === "string" && message["content"])
      chunks.push(chunk(index, { content: message["content"] }));
    const calls = Array.isArray(message["tool_calls"]) ? (message["tool_calls"] as unknown[]).filter(isObject) : [];
    calls.forEach((call, k) => {
      const fn = isObject(call["function"]) ? call["function"] : {};
      const args = fn["arguments"];
      const toolCall = {
        id: call["id"] ?? null,
        index: k,
        type: "function",
        function: { name: fn["name"] ?? null, arguments: typeof args === "string" ? args : JSON.stringify(args ?? {}) },
      };
      chunks.push(chunk(index, { tool_calls: [toolCall] }));
    });
    const finish: Json = { logprobs: choice["logprobs"] ?? null, finish_reason: choice["finish_reason"] ?? null };
    finish["matched_stop"] = choice["matched_stop"] ?? null;
    if ("stop_reason" in choice) finish["stop_reason"] = choice["stop_reason"];
    chunks.push(chunk(index, {}, finish));
  });
  if (options.includeUsage && response["usage"] != null)
    chunks.push({ ...base, choices: [], usage: response["usage"] });
  return chunks;
}

/**
 * The stream a whole text completion corresponds to: per choice, one chunk with its text (and logprobs, token ids
 * as the response has them), its finish reason on it; then the usage chunk when asked for. Routed experts stay out
 * (no server streams them).
 */
export function completionChunksFromResponse(response: Json, options: { includeUsage: boolean }): Json[] {
  const base = {
    id: response["id"],
    object: "text_completion",
    created: response["created"],
    model: response["model"],
  };
  const chunks: Json[] = choicesOf(response).map((choice, position) => {
    const { routed_experts: _routing, sgl_ext: _ext, ...rest } = choice;
    return {
      ...base,
      choices: [{ ...rest, index: typeof choice["index"] === "number" ? choice["index"] : position }],
      usage: null,
    };
  });
  if (options.includeUsage && response["usage"] != null)
    chunks.push({ ...base, choices: [], usage: response["usage"] });
  return chunks;
}
