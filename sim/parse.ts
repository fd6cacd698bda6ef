// Output parsing as vLLM runs it with `--reasoning-parser qwen3 --tool-call-parser hermes`: the whole text at once
// for non-streamed responses, token by token for streams. Both read the same generated text, so a stream's deltas
// add up to the non-streamed message.
import type { Generation } from "./generate.ts";
import { pyJson } from "./py-json.ts";
import { TOKEN } from "./token-text.ts";

const THINK_OPEN = "<think>";
const THINK_CLOSE = "</think>";
const TOOL_OPEN = "<tool_call>";
const TOOL_CALL = /<tool_call>([\s\S]*?)<\/tool_call>|<tool_call>([\s\S]*)/g;

export interface ParsedToolCall {
  name: string;
  arguments: string;
}

export interface ParsedOutput {
  reasoning: string | null;
  content: string | null;
  toolCalls: ParsedToolCall[];
}

/** vLLM 0.10.2's Qwen3 reasoning parser: reasoning only when both `<think>` and `</think>` are present. */
export function splitReasoning(text: string): { reasoning: string | null; content: string | null } {
  if (!text.includes(THINK_OPEN) || !text.includes(THINK_CLOSE)) return { reasoning: null, content: text };
  const open = text.indexOf(THINK_OPEN);
  const rest = text.slice(open + THINK_OPEN.length);
  const close = rest.indexOf(THINK_CLOSE);
  if (close < 0) return { reasoning: null, content: rest };
  const content = rest.slice(close + THINK_CLOSE.length);
  return { reasoning: rest.slice(0, close), content: content || null };
}

/** vLLM's hermes parser: every `<tool_call>` body must be JSON with name and arguments, or no tool call is reported. */
export function extractToolCalls(content: string): { toolCalls: ParsedToolCall[]; content: string | null } {
  if (!content.includes(TOOL_OPEN)) return { toolCalls: [], content };
  try {
    const toolCalls: ParsedToolCall[] = [];
    for (const match of content.matchAll(TOOL_CALL)) {
      const call: unknown = JSON.parse(match[1] ?? match[2] ?? "");
      if (!call || typeof call !== "object" || !("name" in call) || !("arguments" in call)) throw new Error("no name");
      const { name, arguments: args } = call as { name: unknown; arguments: unknown };
      toolCalls.push({ name: String(name), arguments: pyJson(args) });
    }
    const before = content.slice(0, content.indexOf(TOOL_OPEN));
    return { toolCalls, content: before || null };
  } catch {
    return { toolCalls: [], content };
  }
}

export function parseChatOutput(text: string, toolParsing: boolean): ParsedOutput {
  const { reasoning, content } = splitReasoning(text);
  if (!toolParsing) return { reasoning, content, toolCalls: [] };
  const tools = extractToolCalls(content ?? "");
  return { reasoning, content: tools.content, toolCalls: tools.toolCalls };
}

/** What one streamed token adds to the message; `null` when it adds nothing (markup, or half a character). */
export interface TokenDelta {
  reasoning_content?: string;
  content?: string;
  toolCalls?: ToolCallDelta[];
}

export interface ToolCallDelta {
  index: number;
  /** Set on the first delta of a call (vLLM sends id, type and name together). */
  name?: string;
  arguments?: string;
}

/**
 * Per-token deltas of a stream. `<think>`/`</think>` tokens carry no text; text between them is reasoning. After it,
 * with tool parsing on and well-formed calls, the text before the first `<tool_call>` is content, each call's name is
 * reported once its closing quote is generated and its arguments as they are generated; the markup carries no text.
 */
export function streamDeltas(gen: Generation, toolParsing: boolean): (TokenDelta | null)[] {
  const calls = toolParsing && gen.toolCalls.length > 0 && gen.toolCalls.every((c) => c.arguments !== null) ? gen.toolCalls : [];
  const firstTool = calls[0]?.start ?? Infinity;
  const nameSent = calls.map(() => false);
  let sawOpen = false;
  let sawClose = false;
  let pos = 0;
  return gen.ids.map((id, i) => {
    const piece = gen.pieces[i]!;
    const start = pos;
    const end = (pos += piece.length);
    if (id === TOKEN.thinkOpen) {
      sawOpen = true;
      return null;
    }
    if (id === TOKEN.thinkClose) {
      sawClose = true;
      return null;
    }
    if (!piece) return null;
    if (sawOpen && !sawClose) return { reasoning_content: piece };
    if (calls.length === 0) return { content: piece };
    const delta: TokenDelta = {};
    if (start < firstTool) delta.content = piece.slice(0, Math.min(end, firstTool) - start);
    const toolDeltas: ToolCallDelta[] = [];
    calls.forEach((call, index) => {
      const d: ToolCallDelta = { index };
      if (!nameSent[index] && end >= call.nameEnd) {
        nameSent[index] = true;
        d.name = call.name;
      }
      if (nameSent[index]) {
        const args = argumentsDelta(gen.fullText, call, start, end);
        if (args) d.arguments = args;
      }
      if (d.name !== undefined || d.arguments !== undefined) toolDeltas.push(d);
    });
    if (toolDeltas.length > 0) delta.toolCalls = toolDeltas;
    return delta.content !== undefined || delta.toolCalls ? delta : null;
  });
}

// Arguments stream as they are generated when the generated JSON is already what the parser returns (the usual case:
// the sim writes them with Python's separators); otherwise the parser's form is sent whole once the JSON is complete.
function argumentsDelta(fullText: string, call: Generation["toolCalls"][number], start: number, end: number): string {
  const raw = fullText.slice(call.argsStart, call.argsEnd);
  if (raw === call.arguments) {
    const a = Math.max(start, call.argsStart);
    const b = Math.min(end, call.argsEnd);
    return b > a ? fullText.slice(a, b) : "";
  }
  return start < call.argsEnd && end >= call.argsEnd ? call.arguments! : "";
}
