// Scripted policies: a JSON file holding one conversation, turn by turn. The server stays stateless because the turn
// to play is chosen by how many assistant messages the request's history already holds. Turns with a `thread` play
// only in conversations whose opening user messages (before the first tool result) contain that text (a sub-agent
// started with a scripted prompt), counted among the turns of that thread; the other turns play everywhere else.
// Turns with a `prompt` play, in conversations that open no thread, where the last user message contains that text
// (of several, the one written last), the k-th of them after k tool results (one tool call a turn): a session of
// several user prompts, a harness's summarization request, and what comes after a compaction — where counting the
// history's assistant turns would not tell which turn is next.
import { readFileSync } from "node:fs";
import { RlgateError } from "../util/errors.ts";

export type ScriptToolCall = { name: string; arguments: Record<string, unknown> | string };
export type ScriptTurn = {
  reasoning?: string;
  content?: string;
  tool_calls?: ScriptToolCall[];
  thread?: string;
  prompt?: string;
};

export class ScriptError extends RlgateError<"RLGATE_SIM_BAD_SCRIPT"> {
  constructor(message: string, options?: { cause?: unknown }) {
    super("RLGATE_SIM_BAD_SCRIPT", message, options);
    this.name = "ScriptError";
  }
}

/** Reads a script file: a JSON array of turns, or `{"turns": [...]}`. */
export function loadScript(path: string): ScriptTurn[] {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, "utf8"));
  } catch (cause) {
    throw new ScriptError(`cannot read script ${path}: ${(cause as Error).message}`, { cause });
  }
  return parseScript(raw, path);
}

export function parseScript(raw: unknown, source = "script"): ScriptTurn[] {
  const turns = Array.isArray(raw) ? raw : isObject(raw) && Array.isArray(raw["turns"]) ? raw["turns"] : undefined;
  if (!turns) throw new ScriptError(`${source}: expected an array of turns or {"turns": [...]}`);
  return turns.map((turn, i) => parseTurn(turn, `${source}: turn ${i}`));
}

function parseTurn(turn: unknown, where: string): ScriptTurn {
  if (!isObject(turn)) throw new ScriptError(`${where} is not an object`);
  const out: ScriptTurn = {};
  for (const key of ["reasoning", "content", "thread", "prompt"] as const) {
    const value = turn[key];
    if (value === undefined || value === null) continue;
    if (typeof value !== "string") throw new ScriptError(`${where}: ${key} must be a string`);
    out[key] = value;
  }
  const calls = turn["tool_calls"];
  if (calls !== undefined && calls !== null) {
    if (!Array.isArray(calls)) throw new ScriptError(`${where}: tool_calls must be an array`);
    out.tool_calls = calls.map((call, j) => {
      if (!isObject(call) || typeof call["name"] !== "string") {
        throw new ScriptError(`${where}: tool_calls[${j}] needs a string name`);
      }
      const args = call["arguments"] ?? {};
      if (typeof args !== "string" && !isObject(args)) {
        throw new ScriptError(`${where}: tool_calls[${j}].arguments must be an object or a string`);
      }
      return { name: call["name"], arguments: args as Record<string, unknown> | string };
    });
  }
  return out;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
