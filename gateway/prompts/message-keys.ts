// Keys that tell whether a call's messages extend an earlier call's messages plus that call's answer. Each message
// is reduced to what a harness keeps of it: an assistant turn's content without surrounding whitespace (harnesses
// echo vLLM's "\n\n" before a tool call, keep or drop the trailing newline of text) and without its reasoning
// (often dropped), tool-call arguments as parsed JSON (re-serialized by most harnesses), tool-call ids as given. The
// keys of a message list are a hash chain, so "the first k messages" is one lookup.
import { createHash, type Hash } from "node:crypto";
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

function toolCallParts(calls: unknown, parts: string[]): void {
  if (!Array.isArray(calls)) return;
  for (const call of calls) {
    if (!isObject(call)) continue;
    const fn = isObject(call["function"]) ? call["function"] : {};
    parts.push(String(call["id"] ?? ""), String(fn["name"] ?? ""), canonicalArguments(fn["arguments"]));
  }
}

/** What a later call must repeat of this message for the thread to continue, as parts (hashed without copying). */
export function messageParts(message: Json): string[] {
  const role = String(message["role"]);
  if (role === "assistant") {
    const parts = [role, text(message["content"]).trim()];
    toolCallParts(message["tool_calls"], parts);
    return parts;
  }
  if (role === "tool") return [role, String(message["tool_call_id"] ?? ""), text(message["content"])];
  return [role, String(message["name"] ?? ""), text(message["content"])];
}

/** The parts of a message as one string (two messages a thread treats alike have the same key). */
export function messageKey(message: Json): string {
  return JSON.stringify(messageParts(message));
}

function update(hash: Hash, message: Json): Hash {
  // Each part is preceded by its length, so no choice of content can make two different part lists hash alike.
  for (const part of messageParts(message)) hash.update(`\u0000${part.length}:`).update(part);
  return hash.update("\u0001");
}

const digest = (hash: Hash): string => hash.copy().digest("base64url").slice(0, 32);

/**
 * The chain of a call's messages: `at(k)` keys its first k messages, under a seed that holds what else a prompt
 * depends on (the served model, the tools).
 */
export class MessageChain {
  readonly #keys: string[];
  // One running hash over the keys: the key of k messages is its state after k of them (a copy is digested).
  readonly #hash: Hash;

  constructor(seed: string, messages: readonly Json[]) {
    this.#hash = createHash("sha256").update(seed);
    const keys = [digest(this.#hash)];
    for (const message of messages) keys.push(digest(update(this.#hash, message)));
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
    return digest(update(this.#hash.copy(), answer));
  }
}

export function chainSeed(model: unknown, tools: unknown): string {
  return JSON.stringify([model ?? null, tools ?? null]);
}
