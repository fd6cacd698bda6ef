// Reads a vLLM streamed chat chunk for capture without JSON.parse. Parsing every chunk was about half of a streamed
// call's relay work, most of it building the logprob entries (token text, bytes, top alternatives) that capture drops
// when the harness did not ask for logprobs: only each entry's `logprob` number is kept.
//
// The scan accepts only the exact compact layout vLLM writes (keys in its order, no whitespace, no usage object, the
// delta's text keys or its tool calls) and checks every byte of it against the JSON grammar; anything else is declined
// (null) and the caller parses the text. What it returns equals JSON.parse's object except that each
// `logprobs.content` entry holds only its `logprob` (the rest of the entry is never read when logprobs are not wanted).
// Having found where each token field's value lies, it also gives the harness's text (those values spliced to null),
// which spares the second scan `nullValues` would make.
import type { Json } from "./fields.ts";
import { readIdList, type RecentIdLists } from "./id-list.ts";

/** A JSON string token: no raw control characters, only the escapes JSON allows. */
const PLAIN = String.raw`[^"\\\u0000-\u001f]*`;
const STR = String.raw`"${PLAIN}(?:\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})${PLAIN})*"`;
/** A JSON number (Number() of such text is what JSON.parse gives, -0 included). */
const NUM = String.raw`-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?`;
/** Non-negative integers that are exact doubles (15 digits at most). */
const INT = String.raw`(?:0|[1-9]\d{0,14})`;
const INTS = String.raw`\[(?:${INT}(?:,${INT})*)?\]`;
const TOP = String.raw`\{"token":${STR},"logprob":${NUM},"bytes":(?:${INTS}|null)\}`;

const HEAD = new RegExp(
  String.raw`\{"id":(${STR}),"object":"chat\.completion\.chunk","created":(${INT}),"model":(${STR}),"choices":\[`,
  "y",
);
const CHOICE_START = new RegExp(String.raw`\{"index":(${INT}),"delta":\{`, "y");
/**
 * A delta's keys: `role` and a text key, either alone, or none. Reasoning is `reasoning` from vLLM >= 0.17 and
 * `reasoning_content` before (both at once, as 0.12–0.16 could write, is declined and parsed).
 */
const TEXT_KEY = "content|reasoning_content|reasoning";
const DELTA = new RegExp(
  String.raw`(?:"role":(${STR})(?:,"(${TEXT_KEY})":(${STR}))?|"(${TEXT_KEY})":(${STR}))?\},"logprobs":`,
  "y",
);
/** One tool call's delta: the first names the call (id, type, name), the next ones carry its arguments. */
const TOOL_CALL = new RegExp(
  String.raw`\{(?:"id":(${STR}),"type":(${STR}),)?"index":(${INT}),"function":\{(?:"name":(${STR})(?:,"arguments":(${STR}))?|"arguments":(${STR}))?\}\}`,
  "y",
);
const TOOL_CALLS_END = ']},"logprobs":';
/** A logprob entry up to its list of top alternatives; the entry's logprob is captured. */
const ENTRY_HEAD = String.raw`\{"token":${STR},"logprob":(${NUM}),"bytes":(?:${INTS}|null),"top_logprobs":\[`;
const ENTRY = new RegExp(String.raw`${ENTRY_HEAD}(?:${TOP}(?:,${TOP})*)?\]\}`, "y");
const CHOICE_END = new RegExp(
  String.raw`,"finish_reason":(null|${STR})(?:,"stop_reason":(null|${INT}|${STR}))?(?:,"token_ids":(${INTS}))?\}`,
  "y",
);

function stringValue(token: string): string {
  return token.indexOf("\\") < 0 ? token.slice(1, -1) : (JSON.parse(token) as string);
}

/** `[1,2,3]` (already checked against INTS) as numbers. */
function intsValue(token: string): number[] {
  const out: number[] = [];
  let value = 0;
  for (let i = 1; i < token.length; i++) {
    const c = token.charCodeAt(i);
    if (c >= 0x30 && c <= 0x39) value = value * 10 + (c - 0x30);
    else if (i > 1) {
      out.push(value);
      value = 0;
    }
  }
  return out;
}

/**
 * Whether `literal` stands at `at`. V8's `startsWith` compares character by character (~70 ns for 12 characters on
 * the 2-vCPU VM); a slice compared with `===` is compared as memory (~25 ns).
 */
function isAt(text: string, at: number, literal: string): boolean {
  return text.slice(at, at + literal.length) === literal;
}

function match(pattern: RegExp, text: string, at: number): RegExpExecArray | null {
  pattern.lastIndex = at;
  return pattern.exec(text);
}

/** The chunk's logprobs value starting at `at`: null, or `{"content":[...]}` with each entry's logprob kept. */
function scanLogprobs(text: string, at: number): { value: Json | null; end: number } | null {
  if (isAt(text, at, "null")) return { value: null, end: at + 4 };
  return scanContent(text, at, ENTRY);
}

/** A `{"content":[…]}` logprobs value starting at `at` whose entries all match `entry`, each reduced to its logprob. */
function scanContent(
  text: string,
  at: number,
  entry: RegExp,
): { value: Json & { content: Json[] }; end: number } | null {
  if (!isAt(text, at, '{"content":[')) return null;
  let i = at + 12;
  const content: Json[] = [];
  if (text.charCodeAt(i) !== 0x5d) {
    for (;;) {
      const found = match(entry, text, i);
      if (found === null) return null;
      content.push({ logprob: Number(found[1]) });
      i = entry.lastIndex;
      if (text.charCodeAt(i) !== 0x2c) break;
      i++;
    }
  }
  if (!isAt(text, i, "]}")) return null;
  return { value: { content }, end: i + 2 };
}

/** A delta's keys after its opening brace, up to the choice's logprobs value: text keys, or tool calls alone. */
function scanDelta(text: string, at: number): { value: Json; end: number } | null {
  const delta = match(DELTA, text, at);
  if (delta !== null) {
    const value: Json = {};
    if (delta[1] !== undefined) value["role"] = stringValue(delta[1]);
    if (delta[2] !== undefined) value[delta[2]] = stringValue(delta[3]!);
    if (delta[4] !== undefined) value[delta[4]] = stringValue(delta[5]!);
    return { value, end: DELTA.lastIndex };
  }
  if (!isAt(text, at, '"tool_calls":[')) return null;
  const calls: Json[] = [];
  let i = at + 14;
  for (;;) {
    const call = match(TOOL_CALL, text, i);
    if (call === null) return null;
    const value: Json = {};
    if (call[1] !== undefined) {
      value["id"] = stringValue(call[1]);
      value["type"] = stringValue(call[2]!);
    }
    value["index"] = Number(call[3]);
    const fn: Json = {};
    if (call[4] !== undefined) fn["name"] = stringValue(call[4]);
    if (call[5] !== undefined) fn["arguments"] = stringValue(call[5]);
    if (call[6] !== undefined) fn["arguments"] = stringValue(call[6]);
    value["function"] = fn;
    calls.push(value);
    i = TOOL_CALL.lastIndex;
    if (text.charCodeAt(i) !== 0x2c) break;
    i++;
  }
  if (!isAt(text, i, TOOL_CALLS_END)) return null;
  return { value: { tool_calls: calls }, end: i + TOOL_CALLS_END.length };
}

/** Where the values to be given to the harness as `null` lie in the text: start, end pairs in order. */
type Cuts = number[];

function scanChoice(text: string, at: number, cuts: Cuts, nullIds: boolean): { choice: Json; end: number } | null {
  const start = match(CHOICE_START, text, at);
  if (start === null) return null;
  const delta = scanDelta(text, CHOICE_START.lastIndex);
  if (delta === null) return null;
  const logprobs = scanLogprobs(text, delta.end);
  if (logprobs === null) return null;
  cuts.push(delta.end, logprobs.end);
  const end = match(CHOICE_END, text, logprobs.end);
  if (end === null) return null;
  const choice: Json = {
    index: Number(start[1]),
    delta: delta.value,
    logprobs: logprobs.value,
    finish_reason: end[1] === "null" ? null : stringValue(end[1]!),
  };
  if (end[2] !== undefined) choice["stop_reason"] = end[2] === "null" ? null : scalar(end[2]);
  if (end[3] !== undefined) {
    choice["token_ids"] = intsValue(end[3]);
    // The token ids close the choice: their value ends just before its brace.
    if (nullIds) cuts.push(CHOICE_END.lastIndex - 1 - end[3].length, CHOICE_END.lastIndex - 1);
  }
  return { choice, end: CHOICE_END.lastIndex };
}

function scalar(token: string): string | number {
  return token.charCodeAt(0) === 0x22 ? stringValue(token) : Number(token);
}

/** A chunk's head up to its choices' `[`, and what it holds. */
interface ChunkHead {
  text: string;
  id: string;
  created: number;
  model: string;
}

/**
 * The last head read. Every chunk of a stream starts with the same head (id, object, created, model): a chunk that
 * starts with this text holds these values, and its head is compared instead of read.
 */
let lastHead: ChunkHead | null = null;

function readHead(text: string): ChunkHead | null {
  if (lastHead !== null && isAt(text, 0, lastHead.text)) return lastHead;
  const head = match(HEAD, text, 0);
  if (head === null) return null;
  lastHead = {
    text: text.slice(0, HEAD.lastIndex),
    id: stringValue(head[1]!),
    created: Number(head[2]),
    model: stringValue(head[3]!),
  };
  return lastHead;
}

/** What the harness does not get besides the logprobs (which it did not ask for, or the scan would not be used). */
export interface ScanNulls {
  tokenIds: boolean;
  promptTokenIds: boolean;
}

export interface ScannedChunk {
  /** JSON.parse(text) but for the logprob entries, each reduced to `{ logprob }`. */
  chunk: Json;
  /** The text with the logprobs, and the ids `nulls` names, set to null (what `nullValues` gives). */
  harnessText: string;
}

const PROMPT_KEY = ',"prompt_token_ids":';
const USAGE_NULL = ',"usage":null';

/**
 * `text` (one streamed chat chunk) read for capture, or null when it is not in the layout this scan knows: then the
 * caller parses it.
 */
export function scanChatChunk(
  text: string,
  nulls: ScanNulls,
  recent: RecentIdLists | null = null,
): ScannedChunk | null {
  const head = readHead(text);
  if (head === null) return null;
  const choices: Json[] = [];
  const cuts: Cuts = [];
  let i = head.text.length;
  if (text.charCodeAt(i) !== 0x5d) {
    for (;;) {
      const scanned = scanChoice(text, i, cuts, nulls.tokenIds);
      if (scanned === null) return null;
      choices.push(scanned.choice);
      i = scanned.end;
      if (text.charCodeAt(i) !== 0x2c) break;
      i++;
    }
  }
  if (text.charCodeAt(i++) !== 0x5d) return null;
  const chunk: Json = {
    id: head.id,
    object: "chat.completion.chunk",
    created: head.created,
    model: head.model,
    choices,
  };
  if (isAt(text, i, PROMPT_KEY)) {
    const start = i + PROMPT_KEY.length;
    if (isAt(text, start, "null")) {
      chunk["prompt_token_ids"] = null;
      i = start + 4;
    } else {
      const list = readIdList(text, start, recent);
      if (list === null) return null;
      chunk["prompt_token_ids"] = list.ids;
      i = list.end;
    }
    if (nulls.promptTokenIds) cuts.push(start, i);
  }
  if (isAt(text, i, USAGE_NULL)) {
    chunk["usage"] = null;
    i += USAGE_NULL.length;
  }
  if (i !== text.length - 1 || text.charCodeAt(i) !== 0x7d) return null;
  return { chunk, harnessText: spliced(text, cuts) };
}

function spliced(text: string, cuts: Cuts): string {
  let out = "";
  let copied = 0;
  for (let k = 0; k < cuts.length; k += 2) {
    out += text.slice(copied, cuts[k]) + "null";
    copied = cuts[k + 1]!;
  }
  return out + text.slice(copied);
}

/** An entry without top alternatives (`top_logprobs` asked for none): only its logprob is read. */
const PLAIN_ENTRY = new RegExp(String.raw`${ENTRY_HEAD}\]\}`, "y");
const LOGPROBS_KEY = '"logprobs":';

/**
 * A whole chat response (its text) parsed with its logprob entries read by a scan instead of JSON.parse, which spends
 * most of its time on them (token text, bytes, an empty list of alternatives per token): each choice's
 * `"logprobs":{"content":[…]}` is cut from the text, the rest parsed, and each choice given back `{content}` with one
 * `{logprob}` per entry. Null — parse the text — when an entry has another layout (top alternatives included), a
 * `logprobs` key holds anything else, or the cuts are not exactly one per choice.
 */
export function parseChatResponseScanned(text: string, recent: RecentIdLists | null = null): Json | null {
  const cuts: Cuts = [];
  const contents: Json[] = [];
  for (let at = text.indexOf(LOGPROBS_KEY); at >= 0; at = text.indexOf(LOGPROBS_KEY, at)) {
    at += LOGPROBS_KEY.length;
    // Every `logprobs` key holds entries (rlgate asked for them): any other value, a repeated key included, is parsed.
    const scanned = scanContent(text, at, PLAIN_ENTRY);
    if (scanned === null) return null;
    cuts.push(at, scanned.end);
    contents.push(scanned.value);
    at = scanned.end;
  }
  if (contents.length === 0) return null;
  const prompt = promptIdsCut(text, cuts, recent);
  let parsed: unknown;
  try {
    parsed = JSON.parse(spliced(text, cuts));
  } catch {
    return null;
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return null;
  const choices = (parsed as Json)["choices"];
  // A key is never inside a JSON string (its quotes would be escaped), so every cut is a `logprobs` key's value; each
  // must be a choice's, in order.
  if (!Array.isArray(choices) || choices.length !== contents.length) return null;
  for (let k = 0; k < choices.length; k++) {
    const choice = choices[k] as Json;
    if (typeof choice !== "object" || choice === null || choice["logprobs"] !== null) return null;
    const ids = choice["token_ids"];
    if (Array.isArray(ids) && ids.length !== (contents[k]!["content"] as Json[]).length) return null;
    choice["logprobs"] = contents[k]!;
  }
  if (prompt !== null && !putBackPromptIds(parsed as Json, prompt)) return null;
  return parsed as Json;
}

/** A prompt ids key as it appears in text, in any object (in JSON text every unescaped occurrence is a key). */
const ANY_PROMPT_KEY = '"prompt_token_ids":';

/**
 * The prompt's ids (most of an agent's answer), read by `readIdList` and cut from the text when their key is the only
 * one in the text and comes after the other cuts (vLLM's layout: a chat answer's after its choices, a completion's in
 * its one choice); null — JSON.parse reads them — otherwise.
 */
function promptIdsCut(text: string, cuts: Cuts, recent: RecentIdLists | null): number[] | null {
  const key = text.indexOf(ANY_PROMPT_KEY);
  if (key < (cuts.at(-1) ?? 0) || text.indexOf(ANY_PROMPT_KEY, key + 1) >= 0) return null;
  const start = key + ANY_PROMPT_KEY.length;
  const list = readIdList(text, start, recent);
  if (list === null) return null;
  cuts.push(start, list.end);
  return list.ids;
}

/**
 * Puts the ids cut from the text back where the key was (the text held it once, so whichever object holds the key is
 * the one): the response itself or one of its choices. False when neither holds it (the caller parses the text).
 */
function putBackPromptIds(parsed: Json, ids: number[]): boolean {
  const choices = parsed["choices"];
  const holder =
    "prompt_token_ids" in parsed
      ? parsed
      : Array.isArray(choices)
        ? (choices.find((c) => typeof c === "object" && c !== null && "prompt_token_ids" in c) as Json | undefined)
        : undefined;
  if (holder === undefined || holder["prompt_token_ids"] !== null) return false;
  holder["prompt_token_ids"] = ids;
  return true;
}

/**
 * JSON.parse(text) of a chunk or response that the scans decline (the harness asked for logprobs, a translated
 * surface reads the chunk whole, a completion), its prompt ids still read by `readIdList`; throws where JSON.parse
 * throws.
 */
export function parseReadingPromptIds(text: string, recent: RecentIdLists | null): unknown {
  const cuts: Cuts = [];
  const prompt = promptIdsCut(text, cuts, recent);
  if (prompt === null) return JSON.parse(text);
  const parsed: unknown = JSON.parse(spliced(text, cuts));
  if (
    typeof parsed !== "object" ||
    parsed === null ||
    Array.isArray(parsed) ||
    !putBackPromptIds(parsed as Json, prompt)
  )
    return JSON.parse(text); // the key is deeper in the text: read it as sent
  return parsed;
}
