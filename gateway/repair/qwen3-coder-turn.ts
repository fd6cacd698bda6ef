// How Qwen3-Coder's chat template writes an earlier assistant turn, mirrored for history repair (the Qwen3 rules are
// in qwen3-turn.ts). After `<|im_start|>assistant` the template writes, for a turn with tool calls,
//   "\n" + content.trim() + "\n" when the trimmed content is not empty, then "\n" before each `<tool_call>`;
// and for a turn without, "\n" + content as it is. Reasoning is never written. The generation prompt ends in
// `<|im_start|>assistant\n`, so the model's own text for the turn is "\n" + what it sampled before its first call.
// vLLM's `qwen3_coder` parser returns that text as content, unstripped ("Let me look.\n\n"): sent back as it is, or
// trimmed, the template writes it as sampled; a text-only answer trimmed by the harness is put back.
import type { AssistantText, SampledTurn, TurnRules } from "./qwen3-turn.ts";

function renderedHead(turn: AssistantText): string {
  if (turn.toolCalls === 0) return `\n${turn.content}`;
  const content = turn.content.trim();
  return `${content ? `\n${content}\n` : ""}\n`;
}

function sampledHead(turn: SampledTurn): string {
  // A think block the model wrote cannot be written back by this template: no message renders it.
  const think = turn.reasoning !== null ? `<think>${turn.reasoning}</think>` : "";
  return `\n${think}${turn.content ?? ""}`;
}

function faithfulText(turn: SampledTurn): { reasoning: string | null; content: string } | null {
  if (turn.reasoning !== null) return null;
  const text = { reasoning: null, content: turn.content ?? "" };
  return renderedHead({ ...text, toolCalls: turn.toolCalls }) === sampledHead(turn) ? text : null;
}

export const QWEN3_CODER_TURN: TurnRules = { renderedHead, sampledHead, faithfulText };
