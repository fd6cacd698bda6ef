// Keys that tell whether a call's messages extend an earlier call's messages plus that call's answer. Each message
// is reduced to what a harness keeps of it: an assistant turn's content without surrounding whitespace (harnesses
// echo vLLM's "\n\n" before a tool call, keep or drop the trailing newline of text) and without its reasoning
// (often dropped), tool-call arguments as parsed JSON (re-serialized by most harnesses), tool-call ids as given. The
// keys of a message list are a hash chain, so "the first k messages" is one lookup.
import { createHash } from "node:crypto";
import type { Json } from "../upstream/fields.ts";
import { isObject } from "../upstream/fields.ts";

function text(content: unknown): string {
  if (content == null) return "";
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return JSON.stringify(content);
  return content
    .map((part) => (isObject(part) && typeof part["text"] === "string" ? part["text"] : JSON.stringify(part)))
    .join("\n");
}

function canonicalArguments(args: unknown): string {
  if (typeof args !== "string") return JSON.stringify(args ?? null);
  try {
    return JSON.stringify(JSON.parse(args));
  } catch {
    return args;
  }
}

function toolCallsKey(calls: unknown): unknown[] {
  if (!Array.isArray(calls)) return [];
  return calls.filter(isObject).map((call) => {
    const fn = isObject(call["function"]) ? call["function"] : {};
    return [call["id"] ?? null, fn["name"] ?? null, canonicalArguments(fn["arguments"])];
  });
}

/** What a later call must repeat of this message for the thread to continue. */
export function messageKey(message: Json): string {
  const role = message["role"];
  if (role === "assistant") {
    return JSON.stringify(["assistant", text(message["content"]).trim(), toolCallsKey(message["tool_calls"])]);
  }
  if (role === "tool") return JSON.stringify(["tool", message["tool_call_id"] ?? null, text(message["content"])]);
  return JSON.stringify([role, message["name"] ?? null, text(message["content"])]);
}

function step(previous: string, key: string): string {
  return createHash("sha256").update(previous).update("\u0000").update(key).digest("base64url").slice(0, 32);
}

/**
 * The chain of a call's messages: `at(k)` keys its first k messages, under a seed that holds what else a prompt
 * depends on (the served model, the tools).
 */
export class MessageChain {
  readonly #keys: string[];

  constructor(seed: string, messages: readonly Json[]) {
    const keys = [step("", seed)];
    for (const message of messages) keys.push(step(keys[keys.length - 1]!, messageKey(message)));
    this.#keys = keys;
  }

  get length(): number {
    return this.#keys.length - 1;
  }

  at(k: number): string {
    return this.#keys[k]!;
  }

  /** The key of these messages followed by an answer. */
  extendedBy(answer: Json): string {
    return step(this.#keys[this.#keys.length - 1]!, messageKey(answer));
  }
}

export function chainSeed(model: unknown, tools: unknown): string {
  return JSON.stringify([model ?? null, tools ?? null]);
}
