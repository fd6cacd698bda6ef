// How DeepSeek V3.1's template (vLLM's tool-calling one) writes an earlier assistant turn, mirrored for history
// repair (the Qwen3 rules are in qwen3-turn.ts). Reasoning is never written. A turn with tool calls is written as its
// content as it is, then its calls; a turn without as its content, cut after the first `</think>` when it holds one
// (a turn that follows a tool output is written whole). The model's own text for a non-thinking turn is its content
// up to `<｜tool▁calls▁begin｜>`, which vLLM's deepseek_v31 parser returns as it is: a harness that trims it (or
// drops text before a call) is put back. The spaces the template's indentation writes around its markers are the
// same whatever a message holds, so they are not a repair's to mend (docs/prompt-modes.md).
import type { AssistantText, SampledTurn, TurnRules } from "./qwen3-turn.ts";

const THINK_CLOSE = "</think>";

function renderedHead(turn: AssistantText): string {
  if (turn.toolCalls > 0 || !turn.content.includes(THINK_CLOSE)) return turn.content;
  return turn.content.slice(turn.content.indexOf(THINK_CLOSE) + THINK_CLOSE.length);
}

function sampledHead(turn: SampledTurn): string {
  // A thinking turn's reasoning no message can have written back.
  const think = turn.reasoning !== null ? `${turn.reasoning}${THINK_CLOSE}` : "";
  return think + (turn.content ?? "");
}

function faithfulText(turn: SampledTurn): { reasoning: string | null; content: string } | null {
  if (turn.reasoning !== null) return null;
  const text = { reasoning: null, content: turn.content ?? "" };
  return renderedHead({ ...text, toolCalls: turn.toolCalls }) === sampledHead(turn) ? text : null;
}

export const DEEPSEEK_V31_TURN: TurnRules = { renderedHead, sampledHead, faithfulText };
