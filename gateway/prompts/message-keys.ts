// Keys that tell whether a call's messages extend an earlier call's messages plus that call's answer. Each message
// is reduced to what a harness keeps of it: an assistant turn's content without surrounding whitespace (harnesses
// echo vLLM's "\n\n" before a tool call, keep or drop the trailing newline of text) and without its reasoning
// (often dropped), tool-call arguments as parsed JSON (re-serialized by most harnesses), tool-call ids as given. The
// keys of a message list are a hash chain, so "the first k messages" is one lookup.
// Beside that strict chain runs a loose one, where an assistant turn with tool calls is known by its tool-call ids
// alone: the ids the upstream gave are unique per answer, so a harness that echoes them but changed the turn (another
// key order in the arguments, a dropped text, a call renamed after a failed parse) still continues the thread from
// what the model sampled — as history repair, which finds turns by the same ids, puts the sampled turn back.
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

/** OpenClaw echoes a tool-call id with its letters and digits only, cut to this many. */
const ECHOED_ID_LENGTH = 40;
/** A run of this many hex digits is an id's random part (vLLM's `chatcmpl-tool-` + 32); this many of it tell it. */
const RANDOM_HEX = /[0-9a-f]{16,}/;
const RANDOM_KEPT = 24;

/**
 * A tool-call id as harnesses echo it: what tells the call is the random part of the id the upstream gave. OpenClaw
 * sends vLLM's `chatcmpl-tool-` + 32 hex digits back as `chatcmpltool` + the first 28 of them on chat completions, and
 * as `call_chatcmpl-tool-…_f_` + a hash of its own on Responses: an id with a run of 16 hex digits or more is its
 * first 24 of them; any other id is its letters and digits, at most 40.
 */
function callId(id: unknown): string {
  const text = String(id ?? "");
  const random = RANDOM_HEX.exec(text.replace(/[^A-Za-z0-9]/g, "-"));
  if (random) return random[0].slice(0, RANDOM_KEPT);
  return text.replace(/[^A-Za-z0-9]/g, "").slice(0, ECHOED_ID_LENGTH);
}

function toolCallParts(calls: unknown, parts: string[]): void {
  if (!Array.isArray(calls)) return;
  for (const call of calls) {
    if (!isObject(call)) continue;
    const fn = isObject(call["function"]) ? call["function"] : {};
    parts.push(callId(call["id"]), String(fn["name"] ?? ""), canonicalArguments(fn["arguments"]));
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
  if (role === "tool") return [role, callId(message["tool_call_id"]), text(message["content"])];
  return [role, String(message["name"] ?? ""), text(message["content"])];
}

/** The loose parts: an assistant turn whose tool calls all carry ids is those ids; any other message, its parts. */
export function looseMessageParts(message: Json): string[] {
  const calls = message["tool_calls"];
  if (String(message["role"]) !== "assistant" || !Array.isArray(calls) || calls.length === 0)
    return messageParts(message);
  const ids = calls.map((call) => (isObject(call) && typeof call["id"] === "string" ? callId(call["id"]) : ""));
  return ids.includes("") ? messageParts(message) : ["assistant", "\u0002ids", ...ids];
}

/** The parts of a message as one string (two messages a thread treats alike have the same key). */
export function messageKey(message: Json): string {
  return JSON.stringify(messageParts(message));
}

function update(hash: Hash, parts: readonly string[]): Hash {
  // Each part is preceded by its length, so no choice of content can make two different part lists hash alike.
  for (const part of parts) hash.update(`\u0000${part.length}:`).update(part);
  return hash.update("\u0001");
}

const digest = (hash: Hash): string => hash.copy().digest("base64url").slice(0, 32);

/** A call's continuation key holds both (a space never occurs in either); records written before hold the strict one. */
export interface ContinuationKeys {
  strict: string;
  loose: string | null;
}

export function joinKeys(keys: ContinuationKeys): string {
  return keys.loose === null ? keys.strict : `${keys.strict} ${keys.loose}`;
}

export function splitKeys(key: string): ContinuationKeys {
  const at = key.indexOf(" ");
  return at < 0 ? { strict: key, loose: null } : { strict: key.slice(0, at), loose: key.slice(at + 1) };
}

/**
 * The chains of a call's messages: `at(k)` keys its first k messages strictly, `looseAt(k)` loosely, under a seed
 * that holds what else a prompt depends on (the served model, the tools).
 */
export class MessageChain {
  readonly #keys: string[];
  readonly #looseKeys: string[];
  // One running hash per chain: the key of k messages is its state after k of them (a copy is digested).
  readonly #hash: Hash;
  readonly #looseHash: Hash;
  /** Both chains before the last message (a harness may move that one behind the answer). */
  readonly #beforeLast: { hash: Hash; loose: Hash } | null;

  constructor(seed: string, messages: readonly Json[]) {
    this.#hash = createHash("sha256").update(seed);
    this.#looseHash = createHash("sha256").update("loose\u0000").update(seed);
    const keys = [digest(this.#hash)];
    const looseKeys = [digest(this.#looseHash)];
    this.#beforeLast = null;
    for (let i = 0; i < messages.length; i++) {
      if (i === messages.length - 1) this.#beforeLast = { hash: this.#hash.copy(), loose: this.#looseHash.copy() };
      keys.push(digest(update(this.#hash, messageParts(messages[i]!))));
      looseKeys.push(digest(update(this.#looseHash, looseMessageParts(messages[i]!))));
    }
    this.#keys = keys;
    this.#looseKeys = looseKeys;
  }

  get length(): number {
    return this.#keys.length - 1;
  }

  at(k: number): string {
    return this.#keys[k]!;
  }

  looseAt(k: number): string {
    return this.#looseKeys[k]!;
  }

  /** The keys of these messages followed by an answer, as stored with the call (`joinKeys`). */
  extendedBy(answer: Json): string {
    return extended(this.#hash, this.#looseHash, answer);
  }

  /** The keys of these messages without the last one, followed by an answer (null when there are none). */
  extendedWithoutLastBy(answer: Json): string | null {
    return this.#beforeLast && extended(this.#beforeLast.hash, this.#beforeLast.loose, answer);
  }
}

function extended(hash: Hash, looseHash: Hash, answer: Json): string {
  return joinKeys({
    strict: digest(update(hash.copy(), messageParts(answer))),
    loose: digest(update(looseHash.copy(), looseMessageParts(answer))),
  });
}

export function chainSeed(model: unknown, tools: unknown): string {
  return JSON.stringify([model ?? null, tools ?? null]);
}
