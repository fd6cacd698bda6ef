// Llama 3.x's tool-call syntax: a call is a JSON object `{"name": NAME, "parameters": {…}}` (or "arguments"), several
// joined by ";", written as the whole answer, read as vLLM's `llama3_json` tool parser reads it
// (vllm/entrypoints/openai/tool_parsers/llama_tool_parser.py):
// - whole text: no `{` (and no <|python_tag|>) → content. Else the first match of its regex, which finds objects
//   nested at most two deep (`{[^{}]*(?:{[^{}]*}[^{}]*)*}`, several joined by `\s*;\s*`), split on every ";" and each
//   part json.loads'ed: a name and arguments (or parameters) each, arguments json.dumps'ed (ensure_ascii=False);
//   content is then null, whatever text came before or after. Anything that raises (a ";" inside a string, a part
//   that is not JSON or has no name, no match) reports no tool call and the whole text as content;
// - stream: a text that does not start with `{` (or the bot token) is content, token by token; one that does is
//   read as calls, decoded one after the other (each followed by "; "), a call's name sent once it is whole and its
//   arguments as json.dumps of what is parsed so far (they add up to the whole call's).
// Llama 3's chat template renders one tool call per assistant turn (it raises on more) and drops the content of a
// turn with a call, so the model writes the JSON alone.
import type { ParsedToolCall, ToolCallSpan } from "./output-parser.ts";
import { pyJson } from "./py-json.ts";

const BOT_TOKEN = "<|python_tag|>";
const OBJECT = String.raw`\{[^{}]*(?:\{[^{}]*\}[^{}]*)*\}`;
const TOOL_CALLS = new RegExp(`${OBJECT}(?:\\s*;\\s*${OBJECT})*`);

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

/** vLLM's llama3_json extract_tool_calls: the calls of a whole answer, or none and the text as content. */
export function extractLlamaToolCalls(text: string): { toolCalls: ParsedToolCall[]; content: string | null } {
  const none = { toolCalls: [], content: text };
  if (!text.includes(BOT_TOKEN) && !text.includes("{")) return none;
  const match = TOOL_CALLS.exec(text);
  if (!match) return none;
  const toolCalls: ParsedToolCall[] = [];
  for (const part of match[0].split(";").map((p) => p.trim())) {
    if (!part) continue;
    let obj: unknown;
    try {
      obj = JSON.parse(part);
    } catch {
      return none;
    }
    // obj["name"] and obj["arguments"] / obj["parameters"] raise KeyError (or TypeError) when absent.
    if (!isObject(obj) || !("name" in obj)) return none;
    const args = "arguments" in obj ? obj["arguments"] : obj["parameters"];
    if (!("arguments" in obj) && !("parameters" in obj)) return none;
    // FunctionCall(name=...) takes a string only.
    if (typeof obj["name"] !== "string") return none;
    toolCalls.push({ name: obj["name"], arguments: pyJson(args) });
  }
  return { toolCalls, content: null };
}

/**
 * The end of the JSON value that starts at `at` (json's raw_decode), or -1 when it is not whole JSON there. Only
 * objects are looked for: a call is one.
 */
export function jsonObjectEnd(text: string, at: number): number {
  if (text[at] !== "{") return -1;
  let depth = 0;
  for (let i = at; i < text.length; i++) {
    const c = text[i]!;
    if (c === '"') {
      for (i++; i < text.length && text[i] !== '"'; i++) if (text[i] === "\\") i++;
      if (i >= text.length) return -1;
    } else if (c === "{" || c === "[") depth++;
    else if (c === "}" || c === "]") {
      depth--;
      if (depth === 0) {
        try {
          JSON.parse(text.slice(at, i + 1));
          return i + 1;
        } catch {
          return -1;
        }
      }
    }
  }
  return -1;
}

// `{"name": "NAME"` as a model writes it: the name is whole once its closing quote is generated.
const NAME_HEAD = /^\{\s*"name"\s*:\s*"((?:[^"\\]|\\.)*)"/;

/**
 * Where each call sits in a whole generated text, for the stream: none unless the text starts with `{` (or the bot
 * token), then the objects one after the other; a call's name is reported where its closing quote is and its
 * arguments (json.dumps) whole at its end. A decoded object without a name streams nothing in vLLM: here no call is
 * reported at all and the text streams as content.
 */
export function llamaToolCallSpans(text: string): ToolCallSpan[] {
  let at = text.startsWith(BOT_TOKEN) ? BOT_TOKEN.length : 0;
  if (text[at] !== "{") return [];
  const spans: ToolCallSpan[] = [];
  while (at < text.length) {
    const end = jsonObjectEnd(text, at);
    if (end < 0) break;
    const obj = JSON.parse(text.slice(at, end)) as unknown;
    if (!isObject(obj) || typeof obj["name"] !== "string" || !obj["name"]) return [];
    const head = NAME_HEAD.exec(text.slice(at));
    const args = "parameters" in obj ? obj["parameters"] : obj["arguments"];
    // An empty (falsy) arguments object is never streamed.
    const empty = args == null || (isObject(args) && Object.keys(args).length === 0) || args === "" || args === 0;
    spans.push({
      name: obj["name"],
      start: spans.length === 0 ? 0 : at,
      nameEnd: head ? at + head[0].length : end,
      argsStart: end,
      argsEnd: end,
      arguments: empty ? "" : pyJson(args),
    });
    at = end + 2;
  }
  return spans;
}

/** A call as the model writes it: arguments as an object (or its JSON text). */
export interface JsonCallInput {
  name: string;
  arguments: string | Record<string, unknown>;
}

/**
 * Calls written as Llama 3's template renders them back (`{"name": "NAME", "parameters": ` + tojson + `}`), joined
 * by "; " as the parser splits them, so a re-rendered history gives the text the model sampled.
 */
export function writeLlamaToolCalls(calls: readonly JsonCallInput[]): string {
  return calls
    .map((call) => {
      const args = typeof call.arguments === "string" ? parsedOrRaw(call.arguments) : pyJson(call.arguments);
      return `{"name": "${call.name}", "parameters": ${args}}`;
    })
    .join("; ");
}

function parsedOrRaw(args: string): string {
  try {
    return pyJson(JSON.parse(args));
  } catch {
    return args;
  }
}
