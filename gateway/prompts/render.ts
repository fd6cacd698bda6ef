// Prompt ids rendered by the gateway with the served model's chat template and tokenizer: a whole conversation (a new
// thread), or only the messages that follow an earlier answer (a continuing thread). The new messages are rendered
// after a stand-in of two turns (a user turn and the answer as the harness echoed it, its reasoning left out) and the
// text after the stand-in's turns is the suffix: what the template writes for the new messages and the generation
// prompt. Nothing before them is rendered or tokenized again, and a turn-end marker splits the tokenizer's input as
// any added token does, so the suffix's ids are the ids a whole rendering would give at that place.
import { templateReasoning, type ReasoningField } from "../../tokenizer/reasoning-field.ts";
import type { ChatMessage } from "../../tokenizer/chat-template.ts";
import type { ModelChatFormat } from "../../tokenizer/model-format.ts";
import type { Json } from "../upstream/fields.ts";

export interface RenderSettings {
  tools: unknown[] | null;
  enableThinking: boolean | undefined;
  /** The request's reasoning_effort (harmony writes it in the system message). */
  reasoningEffort?: string | null;
  /** The vLLM version rendered as: which name of a history message's reasoning reaches the template (default `reasoning`). */
  reasoningField?: ReasoningField;
}

/** A whole conversation with the generation prompt. */
export function renderFull(format: ModelChatFormat, messages: readonly Json[], settings: RenderSettings): number[] {
  const text = format.render(
    templateReasoning(messages as unknown as ChatMessage[], settings.reasoningField ?? "reasoning"),
    {
      tools: settings.tools,
      enableThinking: settings.enableThinking,
      addGenerationPrompt: true,
      reasoningEffort: settings.reasoningEffort,
    },
  );
  return format.encode(text);
}

/** Thrown when the template does not write the new messages after the stand-in as expected. */
export class SuffixRenderError extends Error {
  readonly code = "RLGATE_SUFFIX_RENDER";
}

/** The texts that close a turn: the family's turn end, and harmony's `<|call|>` / `<|return|>`. */
function closerTexts(format: ModelChatFormat): string[] {
  return [format.turnEnd.text, ...(format.family.markup.alsoEnds ?? [])];
}

/** The ids that close a turn: a sampled answer ending with one is closed already. */
export function turnClosers(format: ModelChatFormat): number[] {
  return closerTexts(format)
    .map((text) => format.tokenId(text))
    .filter((id): id is number => id !== undefined);
}

// Where each closer ends in a text, in order.
function closerEnds(text: string, markers: readonly string[]): number[] {
  const ends: number[] = [];
  for (const marker of markers)
    for (let at = text.indexOf(marker); at >= 0; at = text.indexOf(marker, at + marker.length))
      ends.push(at + marker.length);
  return ends.sort((a, b) => a - b);
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
  const shown = templateReasoning(added as unknown as ChatMessage[], settings.reasoningField ?? "reasoning");
  const after = format.render([...standIn, ...shown], {
    addGenerationPrompt: true,
    enableThinking: settings.enableThinking,
  });
  const markers = closerTexts(format);
  const turns = closerEnds(before, markers).length;
  const cut = turns === 0 ? -1 : (closerEnds(after, markers)[turns - 1] ?? -1);
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
