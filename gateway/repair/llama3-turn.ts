// How Llama 3's chat template writes an earlier assistant turn, mirrored for history repair (the Qwen3 rules are in
// qwen3-turn.ts). After `<|start_header_id|>assistant<|end_header_id|>\n\n` the template writes a turn without tool
// calls as `content | trim`, and a turn with one as its call alone (`{"name": …, "parameters": …}`): the content of
// such a turn is never written. Llama has no reasoning markup. vLLM's llama3_json parser returns no content for a
// turn with calls, so only a text answer can differ from what was sampled: put back as sampled when the model's
// text had no surrounding whitespace (the template trims whatever a message holds, so no message can give it back).
import type { AssistantText, SampledTurn, TurnRules } from "./qwen3-turn.ts";

function renderedHead(turn: AssistantText): string {
  return turn.toolCalls > 0 ? "" : turn.content.trim();
}

function sampledHead(turn: SampledTurn): string {
  return turn.toolCalls > 0 ? "" : (turn.content ?? "");
}

function faithfulText(turn: SampledTurn): { reasoning: string | null; content: string } | null {
  const text = { reasoning: null, content: sampledHead(turn) };
  return renderedHead({ ...text, toolCalls: turn.toolCalls }) === sampledHead(turn) ? text : null;
}

export const LLAMA3_TURN: TurnRules = { renderedHead, sampledHead, faithfulText };
