// Prompt ids rendered by the gateway with the served model's chat template and tokenizer: a whole conversation (a new
// thread), or only the messages that follow an earlier answer (a continuing thread). The new messages are rendered
// after a stand-in of two turns (a user turn and the answer as the harness echoed it, its reasoning left out) and the
// text after the stand-in's turns is the suffix: what the template writes for the new messages and the generation
// prompt. Nothing before them is rendered or tokenized again, and a turn-end marker splits the tokenizer's input as
// any added token does, so the suffix's ids are the ids a whole rendering would give at that place.
import type { ChatMessage } from "../../tokenizer/chat-template.ts";
import type { ModelChatFormat } from "../../tokenizer/model-format.ts";
import type { Json } from "../upstream/fields.ts";

export interface RenderSettings {
  tools: unknown[] | null;
  enableThinking: boolean | undefined;
}

/** A whole conversation with the generation prompt. */
export function renderFull(format: ModelChatFormat, messages: readonly Json[], settings: RenderSettings): number[] {
  const text = format.render(messages as unknown as ChatMessage[], {
    tools: settings.tools,
    enableThinking: settings.enableThinking,
    addGenerationPrompt: true,
  });
  return format.encode(text);
}

/** Thrown when the template does not write the new messages after the stand-in as expected. */
export class SuffixRenderError extends Error {
  readonly code = "RLGATE_SUFFIX_RENDER";
}

function count(text: string, marker: string): number {
  let n = 0;
  for (let at = text.indexOf(marker); at >= 0; at = text.indexOf(marker, at + marker.length)) n++;
  return n;
}

function nthEnd(text: string, marker: string, n: number): number {
  let at = -1;
  for (let i = 0; i < n; i++) {
    at = text.indexOf(marker, at + 1);
    if (at < 0) return -1;
  }
  return at + marker.length;
}

/**
 * The text the template writes after an answer for `added` (the messages that follow it) and the generation
 * prompt; `answer` is the answer as the harness echoed it.
 */
export function renderSuffixText(
  format: ModelChatFormat,
  answer: Json,
  added: readonly Json[],
  settings: RenderSettings,
): string {
  const { reasoning_content: _reasoning, reasoning: _alsoReasoning, ...echoed } = answer;
  // The user turn makes the stand-in a conversation every template accepts and keeps "the last user query" (which
  // decides how Qwen3 renders reasoning of later assistant turns) where it is in the whole conversation: before the answer.
  const standIn = [{ role: "user", content: "." }, echoed] as unknown as ChatMessage[];
  const before = format.render(standIn, { addGenerationPrompt: false, enableThinking: settings.enableThinking });
  const after = format.render([...standIn, ...(added as unknown as ChatMessage[])], {
    addGenerationPrompt: true,
    enableThinking: settings.enableThinking,
  });
  const marker = format.turnEnd.text;
  const turns = count(before, marker);
  const cut = nthEnd(after, marker, turns);
  if (turns === 0 || cut < 0)
    throw new SuffixRenderError(`the chat template wrote ${turns} turn ends for the earlier answer`);
  return after.slice(cut);
}

export function renderSuffix(
  format: ModelChatFormat,
  answer: Json,
  added: readonly Json[],
  settings: RenderSettings,
): number[] {
  return format.encode(renderSuffixText(format, answer, added, settings));
}
