// Qwen3-Coder's (and Qwen3.5's) tool-call syntax: XML parameters inside `<tool_call>` blocks,
//
//   <tool_call>\n<function=NAME>\n<parameter=P>\nvalue\n</parameter>\n</function>\n</tool_call>
//
// read as vLLM's `qwen3_coder` tool parser reads it (vllm/entrypoints/openai/tool_parsers/qwen3coder_tool_parser.py):
// - no `<function=` in the text: no tool call, the text is content;
// - each `<tool_call>` block (closed, or open to the end of the text) holds `<function=…>` blocks (closed, or open to
//   the end); with no `<tool_call>` at all the whole text is searched for them;
// - a function's name runs to its first `>`; each parameter runs from `<parameter=NAME>` to `</parameter>`, the next
//   `<parameter=`, `</function>` or the end, minus one leading and one trailing newline;
// - values are converted by the type the request's tool schema gives the parameter (`null` is null whatever the
//   type; strings as they are; int*/num*/float*/bool as Python converts them, left a string when that fails;
//   object/array by json.loads, then ast.literal_eval, else the string), and `arguments` is json.dumps of them;
// - content is the text before the first `<tool_call>` (or `<function=`), null when empty;
// - anything that raises (a name or parameter with no `>`) reports no tool call and the whole text as content.
// Unlike hermes there is no all-or-nothing JSON check: a call cut off by max_tokens is still a call.
import { readFileSync } from "node:fs";
import type { ParsedToolCall, ToolCallSpan } from "./output-parser.ts";
import { pyJson } from "./py-json.ts";

const TOOL_OPEN = "<tool_call>";
const FUNCTION_OPEN = "<function=";
const FUNCTION_CLOSE = "</function>";

// Python's `$` without MULTILINE matches at the end or before a final newline: `(?=\n$)|$` in JavaScript.
const TOOL_CALL = /<tool_call>([\s\S]*?)<\/tool_call>|<tool_call>([\s\S]*?)(?:(?=\n$)|$)/g;
const FUNCTION = /<function=([\s\S]*?)<\/function>|<function=([\s\S]*)$/g;
const PARAMETER = /<parameter=([\s\S]*?)(?:<\/parameter>|(?=<parameter=)|(?=<\/function>)|(?=\n$)|$)/g;

/** One call found in the text: the parsed call and where it sits. */
interface FoundCall {
  call: ParsedToolCall;
  /** Offset of its `<function=`. */
  start: number;
  /** Offset just after `<function=NAME>`, where the name is known. */
  nameEnd: number;
  /** Offset of the call's end (after `</function>`, or the end of its block). */
  end: number;
}

interface XmlParse {
  calls: FoundCall[];
  /** Offset where content ends (the first `<tool_call>`, else the first `<function=`); -1 when no call was found. */
  contentEnd: number;
}

class ParseError extends Error {}

function parse(text: string, tools: readonly unknown[] | null | undefined): XmlParse | null {
  if (!text.includes(FUNCTION_OPEN)) return null;
  try {
    const blocks: Array<{ body: string; offset: number }> = [];
    for (const m of text.matchAll(TOOL_CALL)) {
      const body = m[1] || m[2] || "";
      blocks.push({ body, offset: m.index + TOOL_OPEN.length });
    }
    if (blocks.length === 0) blocks.push({ body: text, offset: 0 });
    const calls: FoundCall[] = [];
    for (const block of blocks) {
      for (const m of block.body.matchAll(FUNCTION)) {
        const inner = m[1] || m[2] || "";
        const innerOffset = block.offset + m.index + FUNCTION_OPEN.length;
        const call = parseFunction(inner, tools);
        calls.push({
          call,
          start: block.offset + m.index,
          nameEnd: innerOffset + call.name.length + 1,
          end: block.offset + m.index + m[0].length,
        });
      }
    }
    if (calls.length === 0) return null;
    let contentEnd = text.indexOf(TOOL_OPEN);
    if (contentEnd < 0) contentEnd = text.indexOf(FUNCTION_OPEN);
    return { calls, contentEnd };
  } catch (error) {
    if (error instanceof ParseError) return null;
    throw error;
  }
}

function parseFunction(inner: string, tools: readonly unknown[] | null | undefined): ParsedToolCall {
  const gt = inner.indexOf(">");
  if (gt < 0) throw new ParseError("no > after the function name");
  const name = inner.slice(0, gt);
  const config = argumentsConfig(name, tools);
  const params = new Map<string, unknown>();
  for (const m of inner.slice(gt + 1).matchAll(PARAMETER)) {
    const text = m[1]!;
    const at = text.indexOf(">");
    if (at < 0) throw new ParseError("no > after a parameter name");
    let value = text.slice(at + 1);
    if (value.startsWith("\n")) value = value.slice(1);
    if (value.endsWith("\n")) value = value.slice(0, -1);
    const key = text.slice(0, at);
    params.set(key, convertParamValue(value, key, config));
  }
  const parts = [...params].map(([key, value]) => `${JSON.stringify(key)}: ${pyJson(value)}`);
  return { name, arguments: `{${parts.join(", ")}}` };
}

/** The schema properties of a tool by name, as `_get_arguments_config` finds them ({} when unknown). */
function argumentsConfig(name: string, tools: readonly unknown[] | null | undefined): Record<string, unknown> {
  for (const tool of tools ?? []) {
    if (!isObject(tool) || tool["type"] !== "function" || !isObject(tool["function"])) continue;
    const fn = tool["function"];
    if (fn["name"] !== name) continue;
    const params = fn["parameters"];
    if (!isObject(params)) return {};
    return isObject(params["properties"]) ? params["properties"] : params;
  }
  return {};
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

const STRING_TYPES = ["string", "str", "text", "varchar", "char", "enum"];
const INT_PREFIXES = ["int", "uint", "long", "short", "unsigned"];

/** A parameter's value converted by its schema type, as `_convert_param_value` converts it. */
export function convertParamValue(value: string, name: string, config: Record<string, unknown>): unknown {
  if (value.toLowerCase() === "null") return null;
  if (!(name in config)) return value;
  const field = config[name];
  const type = isObject(field) && "type" in field ? pyStr(field["type"]).trim().toLowerCase() : "string";
  if (STRING_TYPES.includes(type)) return value;
  if (INT_PREFIXES.some((p) => type.startsWith(p))) return pyInt(value) ?? value;
  if (type.startsWith("num") || type.startsWith("float")) {
    const n = pyFloat(value);
    return n === null || !Number.isFinite(n) ? value : n;
  }
  if (type === "boolean" || type === "bool" || type === "binary") return value.toLowerCase() === "true";
  if (["object", "array", "arr"].includes(type) || type.startsWith("dict") || type.startsWith("list")) {
    try {
      return JSON.parse(value) as unknown;
    } catch {
      // vLLM then tries ast.literal_eval.
    }
  }
  const literal = pyLiteral(value);
  return literal.ok ? literal.value : value;
}

/** Python's str() of a JSON schema `type` (a list prints as `['string', 'null']`). */
function pyStr(value: unknown): string {
  if (typeof value === "string") return value;
  if (Array.isArray(value)) return `[${value.map((v) => (typeof v === "string" ? `'${v}'` : pyStr(v))).join(", ")}]`;
  if (value === null) return "None";
  if (typeof value === "boolean") return value ? "True" : "False";
  return String(value);
}

const DIGITS = /^[+-]?\d+(?:_\d+)*$/;
const FLOAT = /^[+-]?(?:\d+(?:_\d+)*(?:\.(?:\d+(?:_\d+)*)?)?|\.\d+(?:_\d+)*)(?:[eE][+-]?\d+(?:_\d+)*)?$/;

/** Python's int(text) (surrounding whitespace allowed, `_` between digits), or null where it raises. */
function pyInt(text: string): number | null {
  const t = text.trim();
  return DIGITS.test(t) ? Number(t.replaceAll("_", "")) : null;
}

/** Python's float(text), or null where it raises or gives inf/nan (which vLLM's int() step leaves a string). */
function pyFloat(text: string): number | null {
  const t = text.trim();
  return FLOAT.test(t) ? Number(t.replaceAll("_", "")) : null;
}

type Literal = { ok: true; value: unknown } | { ok: false };

/**
 * Python's ast.literal_eval for the literals a model writes in a parameter: numbers, strings, True/False/None,
 * lists, tuples (as lists) and dicts. Anything else (names, expressions, sets, bytes) is not a literal here.
 */
export function pyLiteral(source: string): Literal {
  const text = source.replace(/^[ \t]+/, "");
  let i = 0;
  const ws = () => {
    while (i < text.length && " \t\n\r".includes(text[i]!)) i++;
  };
  const fail = (): never => {
    throw new ParseError("not a literal");
  };
  const value = (): unknown => {
    ws();
    const c = text[i];
    if (c === undefined) return fail();
    if (c === "[" || c === "(") return sequence(c === "[" ? "]" : ")");
    if (c === "{") return dict();
    if (c === "'" || c === '"') return str(c);
    const word = /^(True|False|None)(?![A-Za-z0-9_])/.exec(text.slice(i));
    if (word) {
      i += word[1]!.length;
      return word[1] === "True" ? true : word[1] === "False" ? false : null;
    }
    const num = /^[+-]?(?:\d[\d_]*(?:\.[\d_]*)?|\.\d[\d_]*)(?:[eE][+-]?\d+)?/.exec(text.slice(i));
    if (num && !/^[A-Za-z_]/.test(text.slice(i + num[0].length))) {
      i += num[0].length;
      const n = Number(num[0].replaceAll("_", ""));
      return Number.isNaN(n) ? fail() : n;
    }
    return fail();
  };
  const sequence = (close: string): unknown[] => {
    i++;
    const items: unknown[] = [];
    ws();
    while (text[i] !== close) {
      items.push(value());
      ws();
      if (text[i] === ",") i++;
      else if (text[i] !== close) fail();
      ws();
    }
    i++;
    return items;
  };
  const dict = (): Record<string, unknown> => {
    i++;
    const out: Record<string, unknown> = {};
    ws();
    while (text[i] !== "}") {
      const key = value();
      if (key !== null && typeof key === "object") fail();
      ws();
      if (text[i++] !== ":") fail();
      out[typeof key === "string" ? key : pyJson(key)] = value();
      ws();
      if (text[i] === ",") i++;
      else if (text[i] !== "}") fail();
      ws();
    }
    i++;
    return out;
  };
  const str = (quote: string): string => {
    i++;
    let out = "";
    while (i < text.length && text[i] !== quote) {
      const c = text[i++]!;
      if (c === "\n") fail();
      if (c !== "\\") {
        out += c;
        continue;
      }
      const e = text[i++];
      const simple: Record<string, string> = { n: "\n", t: "\t", r: "\r", "\\": "\\", "'": "'", '"': '"', "0": "\0" };
      if (e !== undefined && e in simple) out += simple[e];
      else if (e === "x" || e === "u") {
        const len = e === "x" ? 2 : 4;
        const hex = text.slice(i, i + len);
        if (!/^[0-9a-fA-F]+$/.test(hex) || hex.length !== len) fail();
        out += String.fromCharCode(parseInt(hex, 16));
        i += len;
      } else if (e === "\n") {
        // A backslash-newline continues the string.
      } else out += `\\${e ?? ""}`;
    }
    if (text[i] !== quote) fail();
    i++;
    return out;
  };
  try {
    const result = value();
    ws();
    return i === text.length ? { ok: true, value: result } : { ok: false };
  } catch (error) {
    if (error instanceof ParseError) return { ok: false };
    throw error;
  }
}

/** vLLM's `qwen3_coder` extract_tool_calls over the content after reasoning. */
export function extractXmlToolCalls(
  content: string,
  tools: readonly unknown[] | null | undefined,
): { toolCalls: ParsedToolCall[]; content: string | null } {
  const parsed = parse(content, tools);
  if (!parsed) return { toolCalls: [], content };
  return { toolCalls: parsed.calls.map((c) => c.call), content: content.slice(0, parsed.contentEnd) || null };
}

/**
 * Where each call sits in a generated text, for the stream: the name is reported once `<function=NAME>` is written,
 * the arguments (json.dumps of the converted parameters) whole once the call ends; content runs to the first call.
 * vLLM's streaming parser sends the same arguments in pieces (`{`, each parameter, `}`) that add up to these.
 */
export function xmlToolCallSpans(text: string, tools: readonly unknown[] | null | undefined): ToolCallSpan[] {
  const parsed = parse(text, tools);
  if (!parsed) return [];
  return parsed.calls.map((found, i) => ({
    name: found.call.name,
    start: i === 0 ? parsed.contentEnd : found.start,
    nameEnd: found.nameEnd,
    argsStart: found.end,
    argsEnd: found.end,
    arguments: found.call.arguments,
  }));
}

/** A call as the model writes it: arguments as an object (or its JSON text). */
export interface XmlCallInput {
  name: string;
  arguments: string | Record<string, unknown>;
}

/**
 * A turn's content and calls written the way the chat template renders them back (so a re-rendered history gives
 * the same text): content, a blank line, then the calls one per line; a string parameter as it is, an object or
 * list as JSON, any other value as Python's str() writes it (True, None, 2.5).
 */
export function writeXmlToolCalls(content: string, calls: readonly XmlCallInput[]): string {
  let text = content ? `${content}\n\n` : "";
  calls.forEach((call, i) => {
    if (i > 0) text += "\n";
    text += `${TOOL_OPEN}\n${FUNCTION_OPEN}${call.name}>\n`;
    for (const [key, value] of Object.entries(argumentObject(call.arguments))) {
      text += `<parameter=${key}>\n${parameterText(value)}\n</parameter>\n`;
    }
    text += `${FUNCTION_CLOSE}\n</tool_call>`;
  });
  return text;
}

function argumentObject(args: string | Record<string, unknown>): Record<string, unknown> {
  if (typeof args !== "string") return args;
  try {
    const parsed: unknown = JSON.parse(args);
    return isObject(parsed) ? parsed : {};
  } catch {
    return {};
  }
}

/** A parameter value as the template writes it (`tojson` for mappings and lists, Python's str() otherwise). */
export function parameterText(value: unknown): string {
  if (typeof value === "string") return value;
  if (value !== null && typeof value === "object") return pyJson(value);
  return pythonStr(value);
}

function pythonStr(value: unknown): string {
  if (value === null || value === undefined) return "None";
  if (typeof value === "boolean") return value ? "True" : "False";
  if (typeof value === "number") return pyJson(value);
  return String(value);
}

/** Python's repr() of a JSON value (what `| string` prints for a list, e.g. a union `type`). */
function pythonRepr(value: unknown): string {
  if (typeof value === "string") return `'${value.replaceAll("\\", "\\\\").replaceAll("'", "\\'")}'`;
  if (Array.isArray(value)) return `[${value.map(pythonRepr).join(", ")}]`;
  if (isObject(value))
    return `{${Object.entries(value)
      .map(([k, v]) => `${pythonRepr(k)}: ${pythonRepr(v)}`)
      .join(", ")}}`;
  return pythonStr(value);
}

/** A schema's keys the template prints with `| string` handed over printed; mappings and lists stay (`tojson`). */
function printedScalars(dict: Record<string, unknown>, handled: readonly string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(dict)) {
    out[key] = handled.includes(key) || (value !== null && typeof value === "object") ? value : pythonStr(value);
  }
  return out;
}

/**
 * Tools prepared for the XML template the same way as arguments: the scalars it prints with `| string` (a
 * property's `type`, which Python prints as `['string', 'null']` for a union, and the extra schema keys such as
 * `default: true` or `additionalProperties: false`) are handed over as Python prints them.
 */
export function pythonScalarTools(tools: readonly unknown[]): unknown[] {
  return tools.map((tool) => {
    if (!isObject(tool)) return tool;
    const wrapped = isObject(tool["function"]);
    const fn = wrapped ? (tool["function"] as Record<string, unknown>) : tool;
    const out = printedScalars(fn, ["type", "name", "description", "parameters"]);
    // `tool.description | trim` prints Python's str() of it: None for a tool vLLM dumped without one.
    if (fn["description"] === null) out["description"] = "None";
    const params = fn["parameters"];
    if (isObject(params)) {
      const p = printedScalars(params, ["type", "properties"]);
      if (isObject(params["properties"])) {
        const properties: Record<string, unknown> = {};
        for (const [name, field] of Object.entries(params["properties"])) {
          if (!isObject(field)) {
            properties[name] = field;
            continue;
          }
          const f = printedScalars(field, ["name", "type", "description"]);
          if ("type" in field && typeof field["type"] !== "string") f["type"] = pythonRepr(field["type"]);
          properties[name] = f;
        }
        p["properties"] = properties;
      }
      out["parameters"] = p;
    }
    return wrapped ? { ...tool, function: out } : out;
  });
}

let template: string | undefined;

/** Qwen3-Coder's chat template (Qwen/Qwen3-Coder-30B-A3B-Instruct's tokenizer_config.json), kept beside this file. */
export function qwen3CoderTemplate(): string {
  return (template ??= readFileSync(new URL("./templates/qwen3-coder.jinja", import.meta.url), "utf8"));
}

/** Whether a chat template writes tool calls in this syntax (`<function=NAME>` with `<parameter=P>`). */
export function writesXmlToolCalls(template: string): boolean {
  return template.includes("<function=") && template.includes("<parameter=");
}

/**
 * Tool-call arguments prepared for rendering an XML template with @huggingface/jinja as Python's jinja renders it:
 * the template writes scalar parameters with `| string`, which Python prints as True/False/None, so those values
 * are handed over already printed (mappings and lists still go through `tojson`).
 */
export function pythonScalarArguments(args: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(args)) {
    out[key] = value !== null && typeof value === "object" ? value : parameterText(value);
  }
  return out;
}
