// A prompt rendered with DeepSeek V3.1's template (vLLM's tool-calling one), read back into what a policy needs. The
// template has no turn closer after a user turn and no generation prompt after a tool output: the model's turn
// starts after `  <｜Assistant｜>    </think>` (or `<think>`) or right after `<｜tool▁output▁end｜>`. Every assistant
// turn ends with `<｜end▁of▁sentence｜>`, and the template indents the markers it writes with spaces.
import { ConversationReader, type ConversationView, type ToolSpec } from "./conversation-view.ts";

const USER = "<｜User｜>";
const MARKERS = /(<｜User｜>|<｜Assistant｜>|<｜tool▁output▁begin｜>|<｜tool▁output▁end｜>|<｜end▁of▁sentence｜>)/;
const GENERATION = /<｜Assistant｜> *(<\/?think>)$/;
const TOOL = /\n### ([^\n]+)\nDescription: [\s\S]*?\n\nParameters: (\{[^\n]*\})\n/g;

/** The view of a V3.1 chat prompt, or null when the prompt does not end where the model's turn starts. */
export function viewFromDeepSeekPrompt(prompt: string): ConversationView | null {
  const generation = GENERATION.exec(prompt);
  if (!generation && !prompt.endsWith("<｜tool▁output▁end｜>")) return null;
  const reader = new ConversationReader(generation?.[1] === "<think>");
  const firstUser = prompt.indexOf(USER);
  const system = firstUser < 0 ? prompt : prompt.slice(0, firstUser);
  const tools: ToolSpec[] = [];
  for (const [, name, parameters] of system.matchAll(TOOL)) {
    try {
      tools.push({ name: name!, parameters: JSON.parse(parameters!) as unknown });
    } catch {
      // Parameters that are not JSON: not a signature the policy can fill.
    }
  }
  reader.view.tools = tools;
  const parts = (generation ? prompt.slice(0, generation.index) : prompt).split(MARKERS);
  for (let i = 1; i < parts.length; i += 2) {
    const marker = parts[i]!;
    const body = parts[i + 1] ?? "";
    if (marker === "<｜end▁of▁sentence｜>") reader.assistant();
    else if (marker === "<｜tool▁output▁begin｜>") reader.toolResult(body);
    // The template writes spaces between a user's text and the `<｜Assistant｜>` that follows it.
    else if (marker === USER) reader.user(body.replace(/ +$/, ""));
  }
  return reader.view;
}
