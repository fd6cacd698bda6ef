// A harness that moves its last context message: OpenClaw ends every request with an internal-context user message
// (active exec sessions, sub-agents) and leaves it out of the next request, which appends the answer, the tool result
// and that message again. The next call's messages then extend "this call's messages without the last one + the
// answer", and its prompt continues from this prompt without that message's ids, the generation prompt and the
// sampled ids kept as the model saw and sampled them. Here: where that message's ids lie in a prompt.
import type { ChatMessage } from "../../tokenizer/chat-template.ts";
import type { ModelChatFormat } from "../../tokenizer/model-format.ts";
import type { Json } from "../upstream/fields.ts";
import { renderSuffixText, type RenderSettings } from "./render.ts";

/** Roles whose last message a harness may move: anything but the model's turn and a tool's answer to it. */
function movable(message: Json | undefined): boolean {
  const role = message?.["role"];
  return typeof role === "string" && role !== "assistant" && role !== "tool";
}

function endsWith(ids: readonly number[], tail: readonly number[]): boolean {
  if (tail.length > ids.length) return false;
  for (let i = 1; i <= tail.length; i++) if (ids[ids.length - i] !== tail[tail.length - i]) return false;
  return true;
}

/**
 * [start, end) of the ids the last message adds to `promptIds` before the generation prompt, or null when the last
 * message is not one a harness moves or the template writes it differently in place. The message is rendered after a
 * stand-in answer, with the generation prompt; what the template writes after that answer when nothing follows it
 * (Qwen3: the newline and the generation prompt; DeepSeek V3.1 writes none there, so its generation prompt) is kept
 * of that tail, and what the prompt's tail has before it is the message.
 */
export function trailingContextSpan(
  format: ModelChatFormat,
  messages: readonly Json[],
  settings: RenderSettings,
  promptIds: readonly number[],
): { start: number; end: number } | null {
  const last = messages[messages.length - 1];
  if (messages.length < 2 || !movable(last)) return null;
  const standIn: Json = { role: "assistant", content: "." };
  let withIt: number[];
  let kept: number[];
  try {
    withIt = format.encode(renderSuffixText(format, standIn, [last!], settings));
    kept = format.encode(
      renderSuffixText(format, standIn, [], settings) || generationPrompt(format, standIn, last!, settings),
    );
  } catch {
    // A template that refuses the stand-in: the call still continues its thread the ordinary way.
    return null;
  }
  if (kept.length === 0 || withIt.length <= kept.length) return null;
  if (!endsWith(withIt, kept) || !endsWith(promptIds, withIt)) return null;
  const end = promptIds.length - kept.length;
  return { start: end - (withIt.length - kept.length), end };
}

/** What the template adds for the generation prompt after `message` (empty when it adds it elsewhere). */
function generationPrompt(format: ModelChatFormat, answer: Json, message: Json, settings: RenderSettings): string {
  const conversation = [{ role: "user", content: "." }, answer, message] as unknown as ChatMessage[];
  const options = { enableThinking: settings.enableThinking };
  const without = format.render(conversation, { ...options, addGenerationPrompt: false });
  const withIt = format.render(conversation, { ...options, addGenerationPrompt: true });
  return withIt.startsWith(without) ? withIt.slice(without.length) : "";
}
