// A call's identity for branching: what decides the model's answer, read from the request as the harness sent it.
// A branch's call is answered from the backbone only when its identity equals the backbone call's: the same
// conversation, tools and settings mean the harness and its tools reached the same state. Fields that only describe
// the transport (stream_options, user, metadata with session ids) are left out; the stream flag is kept because the
// recorded answer is given back in the shape it was given (whole or streamed).
import { createHash } from "node:crypto";
import type { ApiSurface } from "../../store/records.ts";

/** The request fields that make up the prompt, per harness API. */
const PROMPT_FIELDS = [
  "model",
  "stream",
  "messages",
  "system",
  "prompt",
  "input",
  "instructions",
  "tools",
  "tool_choice",
  "max_tokens",
  "max_completion_tokens",
  "max_output_tokens",
  "temperature",
  "top_p",
  "top_k",
  "stop",
  "n",
  "thinking",
  "reasoning",
  "chat_template_kwargs",
  "previous_response_id",
  // Gemini's (its model and stream flag are in the path: gateway/surfaces/gemini/index.ts geminiBranchView)
  "contents",
  "systemInstruction",
  "toolConfig",
  "generationConfig",
] as const;

/** Hex digest of the call's prompt-bearing fields; two calls with equal identities get the same answer replayed. */
export function callIdentity(api: ApiSurface, body: unknown): string {
  const fields: Record<string, unknown> = { api };
  if (typeof body === "object" && body !== null && !Array.isArray(body)) {
    const record = body as Record<string, unknown>;
    for (const key of PROMPT_FIELDS) if (record[key] !== undefined) fields[key] = record[key];
  }
  return createHash("sha256").update(JSON.stringify(fields)).digest("hex");
}

/** A short account of how two requests differ (for the divergence record): the first prompt field that differs. */
export function firstDifference(api: ApiSurface, a: unknown, b: unknown): string {
  const ra = (typeof a === "object" && a !== null ? a : {}) as Record<string, unknown>;
  const rb = (typeof b === "object" && b !== null ? b : {}) as Record<string, unknown>;
  for (const key of PROMPT_FIELDS) {
    const x = JSON.stringify(ra[key]);
    const y = JSON.stringify(rb[key]);
    if (x === y) continue;
    if (Array.isArray(ra[key]) && Array.isArray(rb[key])) {
      const xs = ra[key] as unknown[];
      const ys = rb[key] as unknown[];
      let i = 0;
      while (i < Math.min(xs.length, ys.length) && JSON.stringify(xs[i]) === JSON.stringify(ys[i])) i++;
      return `${api} request field '${key}' differs at item ${i} (${xs.length} vs ${ys.length} items)`;
    }
    return `${api} request field '${key}' differs`;
  }
  return `${api} request differs`;
}
