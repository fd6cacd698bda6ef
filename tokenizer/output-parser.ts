// Output parsing as vLLM runs it with `--reasoning-parser qwen3 --tool-call-parser hermes` (or `qwen3_coder`, the XML
// syntax of Qwen3-Coder and Qwen3.5: qwen3-coder.ts): the whole text at once for non-streamed responses, token by
// token for streams. Both read the same generated text, so a stream's deltas add up to the non-streamed message. The sim answers chat calls with it, and the gateway's token-native prompt mode
// turns the ids it had sampled back into the harness's API with it: one parser, so both modes answer alike.
import type { ReasoningField } from "./reasoning-field.ts";
import { harmonyDeltas, parseHarmony, type HarmonyCodec } from "./harmony-parse.ts";
import { pyJson } from "./py-json.ts";
import { DEEPSEEK_CALLS_BEGIN, deepSeekToolCallSpans, extractDeepSeekToolCalls } from "./deepseek-v31-calls.ts";
import { extractLlamaToolCalls, llamaToolCallSpans } from "./llama3-json.ts";
import { extractXmlToolCalls, xmlToolCallSpans } from "./qwen3-coder.ts";
import { TOKEN } from "./token-text.ts";

const THINK_OPEN = "<think>";
const THINK_CLOSE = "</think>";
const TOOL_OPEN = "<tool_call>";
const TOOL_CLOSE = "</tool_call>";
const TOOL_CALL = /<tool_call>([\s\S]*?)<\/tool_call>|<tool_call>([\s\S]*)/g;

/** Where one tool call sits in the generated text (offsets into `SampledText.fullText`). */
export interface ToolCallSpan {
  name: string;
  /** Offset of `<tool_call>`. */
  start: number;
  /** Just after the closing quote of the name: where vLLM's hermes parser can first report the name. */
  nameEnd: number;
  argsStart: number;
  argsEnd: number;
  /** What vLLM's hermes parser returns as `arguments` (json.dumps of the parsed JSON); null if not JSON. */
  arguments: string | null;
}

/** What the stream parser reads: the sampled ids, the text each releases, and the tool calls in the whole text. */
export interface SampledText {
  ids: readonly number[];
  /** The text each id releases when detokenized incrementally (special tokens release none). */
  pieces: readonly string[];
  /** The whole text of the turn. */
  fullText: string;
  toolCalls: readonly ToolCallSpan[];
}

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

/** vLLM's `--tool-call-parser` names rlgate parses like vLLM does. */
export type ToolParserName = "hermes" | "qwen3_coder" | "llama3_json" | "openai" | "deepseek_v31";

export const TOOL_PARSERS: readonly ToolParserName[] = [
  "hermes",
  "qwen3_coder",
  "llama3_json",
  "openai",
  "deepseek_v31",
];

/** One request's tool-call parsing: the parser, and the request's tools where the parser reads their schemas. */
export interface ToolSyntax {
  readonly parser: ToolParserName;
  extract(content: string): { toolCalls: ParsedToolCall[]; content: string | null };
  /** Where each call sits in a whole generated text (for the stream's deltas). */
  spans(text: string): ToolCallSpan[];
  /**
   * Whether a token's text may open a tool call, given the answer's text before it: from there a stream's tokens
   * wait for the whole text, which tells whether the calls are well formed.
   */
  opensCall(piece: string, before: string): boolean;
}

const opensTaggedCall = (piece: string): boolean => piece.includes(TOOL_OPEN);

export const HERMES: ToolSyntax = {
  parser: "hermes",
  extract: extractToolCalls,
  spans: toolCallSpans,
  opensCall: opensTaggedCall,
};

const LLAMA3_JSON: ToolSyntax = {
  parser: "llama3_json",
  extract: extractLlamaToolCalls,
  spans: llamaToolCallSpans,
  // vLLM's stream reads calls only when the whole answer starts with `{`.
  opensCall: (piece, before) => before === "" && piece.startsWith("{"),
};

// vLLM's `openai` parser reads harmony ids, not text (harmony-parse.ts): nothing in the text opens a call.
const OPENAI: ToolSyntax = {
  parser: "openai",
  extract: (content) => ({ toolCalls: [], content }),
  spans: () => [],
  opensCall: () => false,
};

const DEEPSEEK_V31: ToolSyntax = {
  parser: "deepseek_v31",
  extract: extractDeepSeekToolCalls,
  spans: deepSeekToolCallSpans,
  opensCall: (piece) => piece.includes(DEEPSEEK_CALLS_BEGIN),
};

/** The tool syntax of a parser for one request (`qwen3_coder` converts parameter values by the tools' schemas). */
export function toolSyntax(parser: ToolParserName, tools?: readonly unknown[] | null): ToolSyntax {
  if (parser === "hermes") return HERMES;
  if (parser === "llama3_json") return LLAMA3_JSON;
  if (parser === "openai") return OPENAI;
  if (parser === "deepseek_v31") return DEEPSEEK_V31;
  return {
    parser,
    extract: (content) => extractXmlToolCalls(content, tools),
    spans: (text) => xmlToolCallSpans(text, tools),
    opensCall: opensTaggedCall,
  };
}

/**
 * A whole answer as vLLM's parsers read it: reasoning split off first where the family is served with a reasoning
 * parser (`reasons`), then tool calls.
 */
export function parseChatOutput(
  text: string,
  toolParsing: boolean,
  syntax: ToolSyntax = HERMES,
  reasons = true,
): ParsedOutput {
  const { reasoning, content } = reasons ? splitReasoning(text) : { reasoning: null, content: text };
  if (!toolParsing) return { reasoning, content, toolCalls: [] };
  const tools = syntax.extract(content ?? "");
  return { reasoning, content: tools.content, toolCalls: tools.toolCalls };
}

/** What the answer parsers need of the served format: its family, and for harmony its ids and decoding. */
export interface AnswerFormat extends HarmonyCodec {
  readonly family: { readonly toolParser: ToolParserName; readonly reasons: boolean };
  readonly think: ThinkIds | null;
}

/**
 * A whole answer by the served family's parsers: harmony (gpt-oss) reads the sampled ids as vLLM does, the others
 * read the text.
 */
export function parseAnswer(
  format: AnswerFormat,
  ids: readonly number[],
  text: string,
  toolParsing: boolean,
  syntax: ToolSyntax,
): ParsedOutput {
  if (format.family.toolParser === "openai") return parseHarmony(format, ids, toolParsing);
  return parseChatOutput(text, toolParsing, syntax, format.family.reasons);
}

/** Every token's stream delta by the served family's parsers (harmony: from the ids, as vLLM streams them). */
export function answerDeltas(format: AnswerFormat, gen: SampledText, toolParsing: boolean): (TokenDelta | null)[] {
  if (format.family.toolParser === "openai") return harmonyDeltas(format, gen.ids, gen.pieces);
  return streamDeltas(gen, toolParsing, format.think);
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
/** The ids of the reasoning markup (`<think>`, `</think>`), which release no text in a stream. */
export interface ThinkIds {
  thinkOpen: number;
  thinkClose: number;
}

const QWEN3_THINK_IDS: ThinkIds = { thinkOpen: TOKEN.thinkOpen, thinkClose: TOKEN.thinkClose };

/** Where a stream is in the reasoning split, token by token: markup releases nothing, text inside the block is reasoning. */
export class ThinkState {
  readonly #ids: ThinkIds | null;
  #open = false;
  #closed = false;

  /** `null`: a model without reasoning markup, all its text is content. */
  constructor(ids: ThinkIds | null = QWEN3_THINK_IDS) {
    this.#ids = ids;
  }

  next(id: number): "markup" | "reasoning" | "content" {
    if (this.#ids === null) return "content";
    if (id === this.#ids.thinkOpen) {
      this.#open = true;
      return "markup";
    }
    if (id === this.#ids.thinkClose) {
      this.#closed = true;
      return "markup";
    }
    return this.#open && !this.#closed ? "reasoning" : "content";
  }
}

export function streamDeltas(
  gen: SampledText,
  toolParsing: boolean,
  think: ThinkIds | null = QWEN3_THINK_IDS,
): (TokenDelta | null)[] {
  const calls =
    toolParsing && gen.toolCalls.length > 0 && gen.toolCalls.every((c) => c.arguments !== null) ? gen.toolCalls : [];
  const firstTool = calls[0]?.start ?? Infinity;
  const nameSent = calls.map(() => false);
  const reasoning = new ThinkState(think);
  let pos = 0;
  return gen.ids.map((id, i) => {
    const piece = gen.pieces[i]!;
    const start = pos;
    const end = (pos += piece.length);
    const kind = reasoning.next(id);
    if (kind === "markup" || !piece) return null;
    if (kind === "reasoning") return { reasoning_content: piece };
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

/**
 * A whole generation's assistant message as vLLM writes it in a chat completion (reasoning left out when not wanted),
 * its reasoning under `field` (reasoning-field.ts: the vLLM version answered as).
 */
export function chatMessageJson(
  parsed: ParsedOutput,
  newCallId: () => string,
  includeReasoning: boolean,
  field: ReasoningField = "reasoning",
): Record<string, unknown> {
  return {
    role: "assistant",
    content: parsed.content,
    refusal: null,
    annotations: null,
    audio: null,
    function_call: null,
    tool_calls: parsed.toolCalls.map((call) => ({
      id: newCallId(),
      type: "function",
      function: { name: call.name, arguments: call.arguments },
    })),
    [field]: includeReasoning ? parsed.reasoning : null,
  };
}

/**
 * A token's delta as vLLM writes it in a chat chunk, reasoning under `field`; `callIds` holds the ids given to this
 * choice's tool calls.
 */
export function chatDeltaJson(
  delta: TokenDelta,
  callIds: string[],
  newCallId: () => string,
  field: ReasoningField = "reasoning",
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (delta.content !== undefined) out["content"] = delta.content;
  if (delta.reasoning_content !== undefined) out[field] = delta.reasoning_content;
  if (delta.toolCalls) {
    out["tool_calls"] = delta.toolCalls.map((call) => {
      const fn: Record<string, string> = {};
      if (call.name !== undefined) fn["name"] = call.name;
      if (call.arguments !== undefined) fn["arguments"] = call.arguments;
      if (call.name === undefined) return { index: call.index, function: fn };
      callIds[call.index] ??= newCallId();
      return { id: callIds[call.index], type: "function", index: call.index, function: fn };
    });
  }
  return out;
}

// Arguments stream as they are generated when the generated JSON is already what the parser returns (the usual case:
// the sim writes them with Python's separators); otherwise the parser's form is sent whole once the JSON is complete.
function argumentsDelta(fullText: string, call: ToolCallSpan, start: number, end: number): string {
  const raw = fullText.slice(call.argsStart, call.argsEnd);
  if (raw === call.arguments) {
    const a = Math.max(start, call.argsStart);
    const b = Math.min(end, call.argsEnd);
    return b > a ? fullText.slice(a, b) : "";
  }
  return start < call.argsEnd && end >= call.argsEnd ? call.arguments! : "";
}

/** What vLLM's hermes parser returns as `arguments` for raw argument JSON (null when it is not JSON). */
export function hermesArguments(raw: string): string | null {
  try {
    return pyJson(JSON.parse(raw));
  } catch {
    return null;
  }
}

// `{"name": "...", "arguments": ` as a model writes it; the arguments run to the body's last `}`.
const CALL_HEAD = /^(\s*\{\s*"name"\s*:\s*")((?:[^"\\]|\\.)*)"\s*,\s*"arguments"\s*:\s*/;

/**
 * The tool calls of a generated text, found by reading it (the sim knows them from writing it). A body in another
 * shape still parses as a call when it is JSON with a name: its name and arguments are then reported at its end.
 */
export function toolCallSpans(text: string): ToolCallSpan[] {
  const spans: ToolCallSpan[] = [];
  let at = text.indexOf(TOOL_OPEN);
  while (at >= 0) {
    const bodyStart = at + TOOL_OPEN.length;
    const close = text.indexOf(TOOL_CLOSE, bodyStart);
    const bodyEnd = close < 0 ? text.length : close;
    const body = text.slice(bodyStart, bodyEnd);
    const head = CALL_HEAD.exec(body);
    const last = body.lastIndexOf("}");
    if (head && last >= head[0].length) {
      const name = JSON.parse(`"${head[2]!}"`) as string;
      const argsStart = bodyStart + head[0].length;
      const raw = text.slice(argsStart, bodyStart + last).trimEnd();
      const nameEnd = bodyStart + head[1]!.length + head[2]!.length + 1;
      spans.push({
        name,
        start: at,
        nameEnd,
        argsStart,
        argsEnd: argsStart + raw.length,
        arguments: hermesArguments(raw),
      });
    } else {
      let name = "";
      let args: string | null = null;
      try {
        const call: unknown = JSON.parse(body);
        if (call && typeof call === "object" && "name" in call && "arguments" in call) {
          name = String((call as { name: unknown }).name);
          args = pyJson((call as { arguments: unknown }).arguments);
        }
      } catch {
        // Not JSON: the call is malformed, and the parser reports every call as content.
      }
      spans.push({ name, start: at, nameEnd: bodyEnd, argsStart: bodyEnd, argsEnd: bodyEnd, arguments: args });
    }
    at = close < 0 ? -1 : text.indexOf(TOOL_OPEN, close + TOOL_CLOSE.length);
  }
  return spans;
}
