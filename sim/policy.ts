// What the simulated model "decides" to say. A policy maps a conversation to one assistant turn; the rest of the sim
// turns that turn into Qwen3-formatted text and tokens.
import type { ConversationView, ToolSpec } from "./conversation-view.ts";
import { mix } from "./hash.ts";
import type { ScriptToolCall, ScriptTurn } from "./script.ts";

export interface SimTurn {
  /** null: no `<think>` block (thinking disabled, or a raw completion). */
  reasoning: string | null;
  content: string;
  toolCalls: ScriptToolCall[];
}

export interface PolicyContext {
  seed: number;
  /** Index of the choice (n > 1): mixed with the seed so choices differ in wording. */
  choice: number;
  script?: readonly ScriptTurn[];
}

const SHELL_LIKE = /shell|bash|exec|command|terminal|run/i;
export const SIM_COMMAND = "echo rlgate-sim";
/**
 * Tool calls the default policy makes in one conversation at most, then it answers: a harness that appends a user
 * message of its own after every tool result (OpenClaw) would otherwise be called again and again (issue 42: 466 calls).
 */
export const MAX_DEFAULT_TOOL_CALLS = 4;

export function decideTurn(view: ConversationView, ctx: PolicyContext): SimTurn {
  const turn = ctx.script ? scriptedTurn(view, ctx.script) : defaultTurn(view, ctx);
  if (!view.thinking) turn.reasoning = null;
  return turn;
}

/** The first `thread` a conversation's opening user text contains (undefined: none, the main thread). */
function threadOf(view: ConversationView, script: readonly ScriptTurn[]): string | undefined {
  return script.find((t) => t.thread !== undefined && view.openingUserText.includes(t.thread))?.thread;
}

/** The turns of the thread a conversation belongs to: the first `thread` its opening user text contains, else the rest. */
function threadTurns(view: ConversationView, script: readonly ScriptTurn[]): readonly ScriptTurn[] {
  const thread = threadOf(view, script);
  return script.filter((t) => t.thread === thread && t.prompt === undefined);
}

/**
 * The turn of the `prompt` the last user message contains, by the tool results since (see script.ts). Of several, the
 * one written last: a summarizer's request quotes the conversation's prompts before its own instruction (OpenCode's).
 */
function promptTurn(view: ConversationView, script: readonly ScriptTurn[]): ScriptTurn | null | undefined {
  let prompt: string | undefined;
  let at = -1;
  for (const t of script) {
    const where = t.prompt === undefined ? -1 : view.lastUserText.lastIndexOf(t.prompt);
    if (where > at) [prompt, at] = [t.prompt, where];
  }
  if (prompt === undefined) return undefined;
  return script.filter((t) => t.prompt === prompt)[view.toolResults.length] ?? null;
}

function scriptedTurn(view: ConversationView, script: readonly ScriptTurn[]): SimTurn {
  // A named thread plays its own turns even when its request quotes a prompt (OpenCode's title request does).
  const byPrompt = threadOf(view, script) === undefined ? promptTurn(view, script) : undefined;
  const turn = byPrompt === undefined ? threadTurns(view, script)[view.assistantTurns] : byPrompt;
  if (!turn) return { reasoning: "The scripted conversation is over.", content: "Done.", toolCalls: [] };
  return { reasoning: turn.reasoning ?? "", content: turn.content ?? "", toolCalls: turn.tool_calls ?? [] };
}

const TOOL_REASONING = [
  "The user wants me to act, so I should run a command first. I will call {tool}.",
  "Let me start by running a quick command with {tool} to see what happens.",
  "I need more information before answering. Calling {tool} is the simplest first step.",
  "A short check with {tool} should tell me enough to answer.",
];
const RESULT_REASONING = [
  "The tool returned its output, so I can answer now.",
  "I have the result of the command. Time to report it.",
  "The command ran. I will quote the first line of its output.",
  "Now that the tool has answered, a short summary is enough.",
];
const RESULT_CONTENT = [
  'The command finished. The first line of its output was: "{line}"',
  'Done. The tool printed: "{line}"',
  'Here is what the command returned first: "{line}"',
  'The result starts with: "{line}"',
];
const CHAT_REASONING = [
  'The user said "{user}". A brief reply is enough.',
  'I should answer "{user}" briefly and politely.',
  'The message is "{user}". I will reply in one sentence.',
  'Let me reply to "{user}" in a few words.',
];
const CHAT_CONTENT = [
  'Hello! This is rlgate sim. You said: "{user}"',
  'rlgate sim here. I read your message: "{user}"',
  'Thanks for your message ("{user}"). This is a simulated answer.',
  'This simulated model received: "{user}"',
];
const CONTINUATIONS = [
  " This is a simulated continuation from rlgate sim.",
  " And so the simulated model went on writing.",
  " rlgate sim continues the text here, deterministically.",
  " The rest of this text comes from a simulated model.",
];

function pick(list: readonly string[], ctx: PolicyContext, salt: number, vars: Record<string, string>): string {
  const base = mix(ctx.seed, salt) % list.length;
  let s = list[(base + ctx.choice) % list.length]!;
  for (const [k, v] of Object.entries(vars)) s = s.replaceAll(`{${k}}`, v);
  // More choices than wordings: keep them distinct anyway.
  if (ctx.choice >= list.length) s += ` (sample ${ctx.choice})`;
  return s;
}

function defaultTurn(view: ConversationView, ctx: PolicyContext): SimTurn {
  if (!view.chatShaped) return { reasoning: null, content: pick(CONTINUATIONS, ctx, 1, {}), toolCalls: [] };
  const tool = view.toolChoice === "none" ? undefined : chooseTool(view);
  if (tool && view.toolResults.length === 0 && view.allToolResults < MAX_DEFAULT_TOOL_CALLS) {
    return {
      reasoning: pick(TOOL_REASONING, ctx, 2, { tool: tool.name }),
      content: "",
      toolCalls: [{ name: tool.name, arguments: argumentsFor(tool.parameters) }],
    };
  }
  const last = view.toolResults.at(-1) ?? (tool ? view.lastToolResult : undefined);
  if (last !== undefined) {
    const line = firstLine(last);
    return {
      reasoning: pick(RESULT_REASONING, ctx, 3, { line }),
      content: pick(RESULT_CONTENT, ctx, 4, { line }),
      toolCalls: [],
    };
  }
  const user = firstLine(view.lastUserText, 80);
  return {
    reasoning: pick(CHAT_REASONING, ctx, 5, { user }),
    content: pick(CHAT_CONTENT, ctx, 6, { user }),
    toolCalls: [],
  };
}

function chooseTool(view: ConversationView): ToolSpec | undefined {
  const choice = view.toolChoice;
  if (typeof choice === "object")
    return view.tools.find((t) => t.name === choice.name) ?? { name: choice.name, parameters: {} };
  return view.tools.find((t) => SHELL_LIKE.test(t.name)) ?? view.tools[0];
}

function firstLine(text: string, max = 200): string {
  const line = text.trim().split("\n")[0]?.trim() ?? "";
  if (!line) return "(no output)";
  return line.length > max ? `${line.slice(0, max)}...` : line;
}

type Schema = Record<string, unknown>;

function asSchema(value: unknown): Schema {
  return value && typeof value === "object" && !Array.isArray(value) ? (value as Schema) : {};
}

/** Arguments for a tool from its JSON schema: a command property runs `echo rlgate-sim`; other required ones get simple values. */
export function argumentsFor(parameters: unknown): Record<string, unknown> {
  const schema = asSchema(parameters);
  const properties = asSchema(schema["properties"]);
  const required = Array.isArray(schema["required"]) ? (schema["required"] as unknown[]) : [];
  const args: Record<string, unknown> = {};
  for (const [name, raw] of Object.entries(properties)) {
    const prop = asSchema(raw);
    if (/^(command|cmd)$/i.test(name)) {
      args[name] = typeOf(prop) === "array" ? ["bash", "-lc", SIM_COMMAND] : SIM_COMMAND;
    } else if (required.includes(name)) {
      args[name] = sampleValue(prop);
    }
  }
  return args;
}

function typeOf(prop: Schema): string | undefined {
  const type = prop["type"];
  if (typeof type === "string") return type;
  if (Array.isArray(type)) return type.find((t): t is string => typeof t === "string" && t !== "null");
  return undefined;
}

function sampleValue(prop: Schema): unknown {
  if (Array.isArray(prop["enum"]) && prop["enum"].length > 0) return prop["enum"][0];
  if ("const" in prop) return prop["const"];
  if ("default" in prop) return prop["default"];
  const variants = prop["anyOf"] ?? prop["oneOf"];
  if (Array.isArray(variants) && variants.length > 0) return sampleValue(asSchema(variants[0]));
  switch (typeOf(prop)) {
    case "integer":
    case "number":
      return typeof prop["minimum"] === "number" ? prop["minimum"] : 1;
    case "boolean":
      return false;
    case "array":
      return [];
    case "object":
      return argumentsFor(prop);
    case "null":
      return null;
    default:
      return "rlgate-sim";
  }
}
