// What a family's real template writes for an earlier assistant turn, for the turn-rule tests: the turn between two
// user turns, rendered without a generation prompt, and the text between its opener and its first call (or its end).
import type { ModelChatFormat } from "../../tokenizer/model-format.ts";

/**
 * The text a template writes between `opener` (the first one after the assistant turn's start `turnStart`) and
 * `callOpen` or `end`, for an assistant turn with `content` and `toolCalls` calls.
 */
export function templateTurnHead(
  format: ModelChatFormat,
  marks: { turnStart: string; opener: string; callOpen: string; end: string },
  content: string | null,
  toolCalls: number,
): string {
  const calls = Array.from({ length: toolCalls }, (_, i) => ({
    id: `c${i}`,
    function: { name: "f", arguments: "{}" },
  }));
  const text = format.render(
    [
      { role: "user", content: "u" },
      { role: "assistant", content, ...(toolCalls ? { tool_calls: calls } : {}) },
      { role: "user", content: "next" },
    ],
    { addGenerationPrompt: false },
  );
  const start = text.indexOf(marks.opener, text.indexOf(marks.turnStart)) + marks.opener.length;
  return text.slice(start, text.indexOf(toolCalls ? marks.callOpen : marks.end, start));
}
