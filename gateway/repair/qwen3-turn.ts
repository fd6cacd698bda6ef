// How Qwen3's chat template writes an earlier assistant turn (one that follows the last user message and is not the
// last message), mirrored in a few string operations, and the assistant message that makes it write back exactly
// what the model sampled. The template:
//   reasoning (reasoning_content, or the text before `</think>` in content) non-empty:
//     `<think>\n` + reasoning.strip("\n") + `\n</think>\n\n` + content.lstrip("\n")
//   otherwise: content as it is
//   then per tool call: "\n" before it when it is not the first or the content is non-empty, `<tool_call>…`.
// vLLM's parsers (qwen3 reasoning, hermes tools) return what was sampled around that: reasoning_content is the text
// between `<think>` and `</think>`, content everything after it up to the first `<tool_call>`. So a turn that only
// calls tools comes back with content "\n\n", and text before a tool call with its "\n": sent back as they are, the
// template writes one newline more than the model sampled.

/** What the upstream returned for one sampled turn. */
export interface SampledTurn {
  reasoning: string | null;
  content: string | null;
  toolCalls: number;
  /** The prompt ended in an empty think block (thinking off): the turn's text starts after it. */
  thinkingOff: boolean;
}

export interface AssistantText {
  reasoning: string | null;
  content: string;
  toolCalls: number;
}

const THINK_CLOSE = "</think>";
const EMPTY_THINK = "<think>\n\n</think>\n\n";

function stripNewlines(text: string): string {
  return text.replace(/^\n+|\n+$/g, "");
}

function lstripNewlines(text: string): string {
  return text.replace(/^\n+/, "");
}

/** The template's text for the turn up to its first tool call (the tool calls themselves are compared apart). */
export function renderedHead(turn: AssistantText): string {
  let reasoning = turn.reasoning ?? "";
  let content = turn.content;
  if (turn.reasoning === null && content.includes(THINK_CLOSE)) {
    const parts = content.split(THINK_CLOSE);
    content = lstripNewlines(parts[parts.length - 1]!);
    const before = parts[0]!.replace(/\n+$/, "");
    reasoning = lstripNewlines(before.slice(before.lastIndexOf("<think>") + (before.includes("<think>") ? 7 : 0)));
  }
  const head = reasoning ? `<think>\n${stripNewlines(reasoning)}\n</think>\n\n${lstripNewlines(content)}` : content;
  return head + (turn.toolCalls > 0 && content ? "\n" : "");
}

/** The model's text for the turn up to its first tool call, generation-prompt think block included. */
export function sampledHead(turn: SampledTurn): string {
  if (turn.reasoning !== null) return `<think>${turn.reasoning}${THINK_CLOSE}${turn.content ?? ""}`;
  return (turn.thinkingOff ? EMPTY_THINK : "") + (turn.content ?? "");
}

/**
 * The reasoning and content that make the template write `sampledHead(turn)`, or null when no message can (e.g. the
 * model wrote text right before `<tool_call>` without a newline, which the template always adds).
 */
export function faithfulText(turn: SampledTurn): { reasoning: string | null; content: string } | null {
  const target = sampledHead(turn);
  // A thinking-off turn keeps its empty think block only through non-empty reasoning: "\n" strips to nothing.
  const reasoning = turn.reasoning !== null ? turn.reasoning : turn.thinkingOff ? "\n" : null;
  const think = reasoning !== null && reasoning ? `<think>\n${stripNewlines(reasoning)}\n</think>\n\n` : "";
  if (!target.startsWith(think)) return null;
  const rest = target.slice(think.length);
  let content = rest;
  if (turn.toolCalls > 0 && rest !== "") {
    if (!rest.endsWith("\n")) return null;
    content = rest.slice(0, -1);
  }
  const text = { reasoning, content };
  return renderedHead({ ...text, toolCalls: turn.toolCalls }) === target ? text : null;
}

/** How a family's template writes an earlier assistant turn, for history repair (Qwen3-Coder's: qwen3-coder-turn.ts). */
export interface TurnRules {
  renderedHead(turn: AssistantText): string;
  sampledHead(turn: SampledTurn): string;
  faithfulText(turn: SampledTurn): { reasoning: string | null; content: string } | null;
}

export const QWEN3_TURN: TurnRules = { renderedHead, sampledHead, faithfulText };
