// gpt-oss output read as vLLM reads it: token by token with openai_harmony's StreamableParser (strict, the first
// message's role already assistant: src/encoding.rs), then
// - whole answers (vllm/entrypoints/openai/parser/harmony_utils.py parse_chat_output and the `openai` tool parser,
//   tool_parsers/openai_tool_parser.py): reasoning is every analysis message joined with "\n" (and an unfinished one);
//   with tool parsing, each message to `functions.NAME` is a call whose arguments are json.dumps(json.loads(text)) when
//   its content type is absent or json (the text itself when that fails), and content is the last finished final
//   message; without it, content is the final and recipient-less commentary messages joined with "\n";
// - streams (chat_completion/stream_harmony.py): each token's content delta goes to content on the final channel or a
//   commentary preamble, to reasoning on analysis, and to a call's arguments when the message is to
//   `functions.NAME` — the call opened (id, name, empty arguments) at its first token with another recipient.
// A token the strict parser refuses (text where a message must start, a header it cannot read) ends the parse there.
import type { ParsedOutput, ParsedToolCall, TokenDelta, ToolCallDelta } from "./output-parser.ts";
import { HARMONY_TOKENS } from "./harmony-render.ts";
import { pyJsonAscii } from "./py-json.ts";

/** What the parser needs of the served tokenizer. */
export interface HarmonyCodec {
  tokenId(text: string): number | undefined;
  decode(ids: readonly number[]): string;
}

interface Ids {
  start: number;
  message: number;
  stops: ReadonlySet<number>;
}

function idsOf(codec: HarmonyCodec): Ids {
  const id = (text: string): number => {
    const found = codec.tokenId(text);
    if (found === undefined) throw new Error(`the tokenizer has no ${text} token, which harmony needs`);
    return found;
  };
  return {
    start: id(HARMONY_TOKENS.start),
    message: id(HARMONY_TOKENS.message),
    stops: new Set([id(HARMONY_TOKENS.return), id(HARMONY_TOKENS.call), id(HARMONY_TOKENS.end)]),
  };
}

const ROLES = new Set(["system", "developer", "user", "assistant", "tool"]);

export interface HarmonyHeader {
  role: string;
  channel: string | null;
  recipient: string | null;
  contentType: string | null;
}

export interface HarmonyMessageOut extends HarmonyHeader {
  text: string;
}

/** parse_header_from_string: channel, then role, recipient (`to=…`) and content type from the words left. */
export function parseHarmonyHeader(raw: string, role: string | null): HarmonyHeader {
  let header = raw;
  let channel: string | null = null;
  const at = header.indexOf(HARMONY_TOKENS.channel);
  if (at >= 0) {
    const after = header.slice(at + HARMONY_TOKENS.channel.length);
    const end = after.search(/[\s<]/);
    const value = end < 0 ? after : after.slice(0, end);
    if (!value) throw new Error("channel marker present but no channel value found in header");
    channel = value;
    header = header.slice(0, at) + after.slice(value.length);
  }
  header = header.trim();
  if (header.includes(HARMONY_TOKENS.constrain))
    header = header.replaceAll(HARMONY_TOKENS.constrain, ` ${HARMONY_TOKENS.constrain}`).trim();
  const parts = header.split(/\s+/).filter(Boolean);
  let resolved = role;
  if (resolved === null) {
    const first = parts[0];
    if (first === undefined) throw new Error("message header did not contain a role");
    if (ROLES.has(first)) resolved = first;
    else if (parts.length > 1 || first.startsWith("to=")) {
      parts.shift();
      resolved = "tool";
    } else throw new Error(`Unknown role: ${first}`);
  }
  if (parts[0] === resolved) parts.shift();
  let recipient: string | null = null;
  let contentType: string | null = null;
  if (parts.length > 0) {
    const count = parts.length;
    const last = parts.pop()!;
    if (last.startsWith("to=")) recipient = last.slice(3);
    else if (count === 1) recipient = last;
    else {
      contentType = last;
      const raw = parts.pop();
      if (raw !== undefined) recipient = raw.startsWith("to=") ? raw.slice(3) : raw;
    }
  }
  if (parts.length > 0) throw new Error(`unexpected tokens remaining in message header: ${parts.join(" ")}`);
  return { role: resolved, channel, recipient, contentType };
}

/** The StreamableParser's state over a completion's ids. */
export class HarmonyParser {
  readonly #codec: HarmonyCodec;
  readonly #ids: Ids;
  #state: "start" | "header" | "content" | "failed" = "header";
  #nextRole: string | null = "assistant";
  #headerIds: number[] = [];
  #contentIds: number[] = [];
  #header: HarmonyHeader | null = null;
  readonly messages: HarmonyMessageOut[] = [];

  constructor(codec: HarmonyCodec) {
    this.#codec = codec;
    this.#ids = idsOf(codec);
  }

  // The tokenizer refuses to decode no ids; an empty header or message is "".
  #decode(ids: readonly number[]): string {
    return ids.length > 0 ? this.#codec.decode(ids) : "";
  }

  /** The header of the message being read (null between messages). */
  get current(): HarmonyHeader | null {
    return this.#state === "content" ? this.#header : null;
  }

  /** The text of the message being read so far. */
  get currentText(): string {
    return this.#state === "content" ? this.#decode(this.#contentIds) : "";
  }

  /** Reads one id; returns whether it is content of the current message (its text is then that message's). */
  process(id: number): boolean {
    switch (this.#state) {
      case "failed":
        return false;
      case "start":
        if (id === this.#ids.start) this.#state = "header";
        else this.#state = "failed";
        return false;
      case "header":
        if (id !== this.#ids.message) {
          this.#headerIds.push(id);
          return false;
        }
        try {
          this.#header = parseHarmonyHeader(this.#decode(this.#headerIds), this.#nextRole);
        } catch {
          this.#state = "failed";
          return false;
        }
        this.#nextRole = null;
        this.#headerIds = [];
        this.#contentIds = [];
        this.#state = "content";
        return false;
      case "content":
        if (this.#ids.stops.has(id)) {
          this.messages.push({ ...this.#header!, text: this.#decode(this.#contentIds) });
          this.#header = null;
          this.#state = "start";
          return false;
        }
        this.#contentIds.push(id);
        return true;
    }
  }
}

function isFunctionCall(m: HarmonyHeader): boolean {
  return m.recipient !== null && m.recipient.startsWith("functions.");
}

function callArguments(m: HarmonyMessageOut): string {
  if (m.contentType && !m.contentType.includes("json")) return m.text;
  try {
    return pyJsonAscii(JSON.parse(m.text));
  } catch {
    return m.text;
  }
}

/** A whole completion's ids as vLLM's chat route answers them for gpt-oss. */
export function parseHarmony(codec: HarmonyCodec, ids: readonly number[], toolParsing: boolean): ParsedOutput {
  const parser = new HarmonyParser(codec);
  for (const id of ids) parser.process(id);
  const done = parser.messages;
  const current = parser.current;
  const partial = parser.currentText;
  const reasoningTexts = done.filter((m) => m.channel === "analysis").map((m) => m.text);
  if (current?.channel === "analysis" && partial) reasoningTexts.push(partial);
  const reasoning = reasoningTexts.join("\n") || null;
  if (toolParsing) {
    const toolCalls: ParsedToolCall[] = [];
    let content: string | null = null;
    for (const m of done) {
      // The first `functions.` splits the name off, as Python's split does.
      if (isFunctionCall(m))
        toolCalls.push({ name: m.recipient!.split("functions.")[1]!, arguments: callArguments(m) });
      else if (m.channel === "final") content = m.text;
    }
    return { reasoning, content, toolCalls };
  }
  const visible = (m: HarmonyHeader) => m.channel === "final" || (m.channel === "commentary" && !m.recipient);
  const finalTexts = done.filter(visible).map((m) => m.text);
  if (current && visible(current) && partial) finalTexts.push(partial);
  return { reasoning, content: finalTexts.join("\n") || null, toolCalls: [] };
}

/** Streams a completion token by token as vLLM's harmony chat stream does. */
export class HarmonyStream {
  readonly #parser: HarmonyParser;
  #previousRecipient: string | null = null;
  #calls = 0;

  constructor(codec: HarmonyCodec) {
    this.#parser = new HarmonyParser(codec);
  }

  /** The delta of one sampled id; `piece` is the text it releases. */
  next(id: number, piece: string): TokenDelta | null {
    const isContent = this.#parser.process(id);
    const header = this.#parser.current;
    const text = isContent ? piece : "";
    const previous = this.#previousRecipient;
    this.#previousRecipient = header?.recipient ?? null;
    if (header === null) return null;
    if (header.channel === "final") return { content: text };
    if ((header.channel === "commentary" || header.channel === "analysis") && isFunctionCall(header)) {
      const calls: ToolCallDelta[] = [];
      if (previous !== header.recipient) {
        calls.push({
          index: this.#calls++,
          name: header.recipient!.split("functions.").slice(1).join("functions."),
          arguments: "",
        });
      }
      if (text) calls.push({ index: this.#calls - 1, arguments: text });
      return calls.length > 0 ? { toolCalls: calls } : null;
    }
    if (header.channel === "commentary" && header.recipient === null) return { content: text };
    if (header.channel === "analysis" && text) return { reasoning_content: text };
    return null;
  }
}

/** Every id's delta of a whole completion (the sim's stream). */
export function harmonyDeltas(
  codec: HarmonyCodec,
  ids: readonly number[],
  pieces: readonly string[],
): (TokenDelta | null)[] {
  const stream = new HarmonyStream(codec);
  return ids.map((id, i) => stream.next(id, pieces[i] ?? ""));
}
