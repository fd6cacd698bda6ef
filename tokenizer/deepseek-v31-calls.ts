// DeepSeek V3.1's tool-call syntax, read as vLLM's `deepseek_v31` tool parser reads it
// (vllm/entrypoints/openai/tool_parsers/deepseekv31_tool_parser.py):
//   <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>ARGS<｜tool▁call▁end｜>…<｜tool▁calls▁end｜>
// The markers are added tokens that are not special, so they are in the output text.
// - whole text: no `<｜tool▁calls▁begin｜>` → all content. Else every `<｜tool▁call▁begin｜>(.*?)<｜tool▁sep｜>(.*?)
//   <｜tool▁call▁end｜>` (Python's `.`: no newline) is a call, its name and arguments as written (arguments are not
//   parsed or re-serialized); content is the text before `<｜tool▁calls▁begin｜>` (null when empty), and text after
//   the calls is dropped. A block with no whole call reports no call and only the text before it (vLLM says
//   tools_called with an empty list; the text after `<｜tool▁calls▁begin｜>` is lost there too).
// - stream: before `<｜tool▁calls▁begin｜>` the text is content; a call's name is sent once `<｜tool▁sep｜>` is
//   generated, its arguments as they are generated (the markup sends nothing), adding up to the whole-text result.
import type { ParsedToolCall, ToolCallSpan } from "./output-parser.ts";
import { pyJson } from "./py-json.ts";

export const DEEPSEEK_CALLS_BEGIN = "<｜tool▁calls▁begin｜>";
const CALLS_END = "<｜tool▁calls▁end｜>";
const CALL_BEGIN = "<｜tool▁call▁begin｜>";
const CALL_END = "<｜tool▁call▁end｜>";
const SEP = "<｜tool▁sep｜>";
const CALL = new RegExp(`${CALL_BEGIN}([^\\n]*?)${SEP}([^\\n]*?)${CALL_END}`, "g");

/** vLLM's deepseek_v31 extract_tool_calls over the content (after reasoning). */
export function extractDeepSeekToolCalls(content: string): { toolCalls: ParsedToolCall[]; content: string | null } {
  const begin = content.indexOf(DEEPSEEK_CALLS_BEGIN);
  if (begin < 0) return { toolCalls: [], content };
  const toolCalls = [...content.matchAll(CALL)].map((m) => ({ name: m[1]!, arguments: m[2]! }));
  return { toolCalls, content: content.slice(0, begin) || null };
}

/** Where each whole call sits in a generated text, for the stream: content runs to `<｜tool▁calls▁begin｜>`. */
export function deepSeekToolCallSpans(text: string): ToolCallSpan[] {
  const begin = text.indexOf(DEEPSEEK_CALLS_BEGIN);
  if (begin < 0) return [];
  return [...text.matchAll(CALL)].map((m, i) => {
    const nameEnd = m.index + CALL_BEGIN.length + m[1]!.length + SEP.length;
    return {
      name: m[1]!,
      start: i === 0 ? Math.min(begin, m.index) : m.index,
      nameEnd,
      argsStart: nameEnd,
      argsEnd: nameEnd + m[2]!.length,
      arguments: m[2]!,
    };
  });
}

/** A call as the model writes it: arguments as an object (or its JSON text). */
export interface DeepSeekCallInput {
  name: string;
  arguments: string | Record<string, unknown>;
}

/**
 * Content and calls as V3.1 writes them and vLLM's template renders them back (arguments through `tojson`: Python's
 * json.dumps spacing), chained without separators as the template's tool prompt asks.
 */
export function writeDeepSeekToolCalls(content: string, calls: readonly DeepSeekCallInput[]): string {
  if (calls.length === 0) return content;
  const written = calls.map((call) => `${CALL_BEGIN}${call.name}${SEP}${argumentsText(call.arguments)}${CALL_END}`);
  return `${content}${DEEPSEEK_CALLS_BEGIN}${written.join("")}${CALLS_END}`;
}

function argumentsText(args: string | Record<string, unknown>): string {
  if (typeof args !== "string") return pyJson(args);
  try {
    return pyJson(JSON.parse(args));
  } catch {
    return args;
  }
}
