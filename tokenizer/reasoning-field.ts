// Where a chat completion carries the model's reasoning, by server version. vLLM wrote `reasoning_content` (the
// DeepSeek name), added `reasoning` beside it (vllm-project/vllm#27752, Nov 2025), then removed `reasoning_content`
// (#33402, Jan 2026; released in 0.17): a current vLLM answers `message.reasoning` and streams `delta.reasoning` only.
// SGLang still answers `reasoning_content`.
import type { ChatMessage } from "./chat-template.ts";

export const REASONING_FIELDS = ["reasoning", "reasoning_content"] as const;
/** `reasoning`: vLLM >= 0.17 (default); `reasoning_content`: vLLM <= 0.16 and SGLang. */
export type ReasoningField = (typeof REASONING_FIELDS)[number];

/** The reasoning an answer, delta or history message carries under either name (the current one first). */
export function reasoningOf(message: Record<string, unknown>): unknown {
  return message["reasoning"] ?? message["reasoning_content"];
}

/** The reasoning of a history message that reaches the template of a server answering with `field`, or null. */
export function renderedReasoning(message: Record<string, unknown>, field: ReasoningField): string | null {
  const given = field === "reasoning" ? message["reasoning"] : reasoningOf(message);
  return typeof given === "string" ? given : null;
}

/**
 * An assistant message's reasoning as vLLM hands it to the chat template. vLLM >= 0.17 reads `reasoning` only (a
 * history message's `reasoning_content` is dropped: vllm-project/vllm#38488) and gives the template both names, since
 * templates such as Qwen3's read `reasoning_content`; older versions took either name.
 */
export function templateReasoning(messages: readonly ChatMessage[], field: ReasoningField): ChatMessage[] {
  return messages.map((message) => {
    if (message.role !== "assistant") return message;
    const given = renderedReasoning(message as unknown as Record<string, unknown>, field);
    const { reasoning_content: _legacy, ...rest } = message as ChatMessage & { reasoning?: unknown };
    if (given === null) {
      delete (rest as { reasoning?: unknown }).reasoning;
      return rest;
    }
    return { ...rest, reasoning: given, reasoning_content: given } as ChatMessage;
  });
}

/**
 * Puts an assistant message's reasoning in a request under both names, or removes both (null): vLLM >= 0.17 reads
 * `reasoning` only, SGLang and older vLLM `reasoning_content`, and each ignores the other name.
 */
export function setReasoning(message: Record<string, unknown>, text: string | null): void {
  if (text === null) {
    delete message["reasoning"];
    delete message["reasoning_content"];
    return;
  }
  message["reasoning"] = text;
  message["reasoning_content"] = text;
}
