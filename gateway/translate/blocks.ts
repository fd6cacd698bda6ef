// Turns the chunks of a chat completion (choice 0) into a sequence of content blocks — reasoning, text, tool call —
// each opened, extended and closed: the common ground of Anthropic's content blocks and the Responses API's output
// items. Both translators read this one splitter, so a message is cut into blocks the same way on both surfaces,
// streamed or not.
//
// Whitespace-only text is not a block: vLLM's Qwen3 reasoning parser returns the "\n\n" after `</think>` as content,
// which before a tool call is all the content there is. A text block opens at its first non-whitespace character,
// without the newlines before it, and a reasoning block without the "\n" after `<think>`: harnesses print those as
// blank lines. Only what the harness sees loses them — the record keeps the sampled ids — and the Qwen3 template
// strips the same newlines when the history is rendered again, so the next turn's prompt is the same either way
// (where a harness changes it otherwise, history repair puts back the recorded text).
import { randomUUID } from "node:crypto";
import { choicesOf, isObject, numberArray, type Json } from "../upstream/fields.ts";

export type BlockKind = "reasoning" | "text" | "tool";

export type BlockEvent =
  | { type: "start"; kind: "reasoning" }
  | { type: "start"; kind: "text" }
  | { type: "start"; kind: "tool"; id: string; name: string }
  | { type: "delta"; kind: BlockKind; text: string }
  | { type: "stop"; kind: BlockKind };

export interface ChatEnd {
  finishReason: string | null;
  /** The stop string that ended the turn (vLLM `stop_reason`, SGLang `matched_stop`), when it was a string. */
  stopSequence: string | null;
  promptTokens: number | null;
  completionTokens: number | null;
}

export function newCallId(): string {
  return `call_${randomUUID().replaceAll("-", "").slice(0, 24)}`;
}

const LEADING_NEWLINES = /^\n+/;

export class ChatBlockSplitter {
  /** The choice this splitter reads (Gemini asks for several candidates; the other APIs read choice 0). */
  readonly #choice: number;
  #open: BlockKind | null = null;
  #toolIndex: number | null = null;
  #pendingText = "";
  #finishReason: string | null = null;
  #stopSequence: string | null = null;
  #promptTokens: number | null = null;
  #completionTokens: number | null = null;
  #ended = false;

  constructor(choice = 0) {
    this.#choice = choice;
  }

  /** Prompt length when known before the usage chunk (vLLM sends the prompt ids on the first chunk). */
  get promptTokens(): number | null {
    return this.#promptTokens;
  }

  set promptTokens(value: number | null) {
    this.#promptTokens = value;
  }

  push(chunk: Json): BlockEvent[] {
    if (this.#ended) throw new Error("chat chunk after the end of the message");
    const events: BlockEvent[] = [];
    const prompt = numberArray(chunk["prompt_token_ids"]);
    if (prompt && this.#promptTokens === null) this.#promptTokens = prompt.length;
    const usage = chunk["usage"];
    if (isObject(usage)) {
      if (typeof usage["prompt_tokens"] === "number") this.#promptTokens = usage["prompt_tokens"];
      if (typeof usage["completion_tokens"] === "number") this.#completionTokens = usage["completion_tokens"];
    }
    for (const choice of choicesOf(chunk)) {
      if ((choice["index"] ?? 0) !== this.#choice) continue;
      const delta = isObject(choice["delta"]) ? choice["delta"] : isObject(choice["message"]) ? choice["message"] : {};
      const reasoning = delta["reasoning_content"] ?? delta["reasoning"];
      if (typeof reasoning === "string" && reasoning) this.#reasoning(reasoning, events);
      if (typeof delta["content"] === "string" && delta["content"]) this.#text(delta["content"], events);
      if (Array.isArray(delta["tool_calls"])) {
        for (const call of delta["tool_calls"]) if (isObject(call)) this.#tool(call, events);
      }
      if (typeof choice["finish_reason"] === "string") this.#finishReason = choice["finish_reason"];
      for (const key of ["stop_reason", "matched_stop"]) {
        if (typeof choice[key] === "string") this.#stopSequence = choice[key] as string;
      }
    }
    return events;
  }

  /** Closes the open block; what came in after this is an error. */
  end(): { events: BlockEvent[]; end: ChatEnd } {
    const events: BlockEvent[] = [];
    this.#close(events);
    this.#ended = true;
    return {
      events,
      end: {
        finishReason: this.#finishReason,
        stopSequence: this.#stopSequence,
        promptTokens: this.#promptTokens,
        completionTokens: this.#completionTokens,
      },
    };
  }

  #close(events: BlockEvent[]): void {
    this.#pendingText = "";
    if (this.#open === null) return;
    events.push({ type: "stop", kind: this.#open });
    this.#open = null;
    this.#toolIndex = null;
  }

  #reasoning(text: string, events: BlockEvent[]): void {
    if (this.#open !== "reasoning") {
      const rest = text.replace(LEADING_NEWLINES, "");
      if (!rest) return; // the newline after <think>: the block opens with its first other character
      this.#close(events);
      this.#open = "reasoning";
      events.push({ type: "start", kind: "reasoning" }, { type: "delta", kind: "reasoning", text: rest });
      return;
    }
    events.push({ type: "delta", kind: "reasoning", text });
  }

  #text(text: string, events: BlockEvent[]): void {
    if (this.#open === "text") {
      events.push({ type: "delta", kind: "text", text });
      return;
    }
    this.#pendingText += text;
    if (!/\S/.test(this.#pendingText)) return;
    const pending = this.#pendingText.replace(LEADING_NEWLINES, "");
    this.#close(events);
    this.#open = "text";
    events.push({ type: "start", kind: "text" }, { type: "delta", kind: "text", text: pending });
  }

  #tool(call: Json, events: BlockEvent[]): void {
    const fn = isObject(call["function"]) ? call["function"] : {};
    const index = typeof call["index"] === "number" ? call["index"] : null;
    const isNew =
      this.#open !== "tool" || (index !== null && index !== this.#toolIndex) || typeof call["id"] === "string";
    if (isNew) {
      this.#close(events);
      this.#open = "tool";
      this.#toolIndex = index;
      const id = typeof call["id"] === "string" && call["id"] ? call["id"] : newCallId();
      events.push({ type: "start", kind: "tool", id, name: typeof fn["name"] === "string" ? fn["name"] : "" });
    }
    if (typeof fn["arguments"] === "string" && fn["arguments"])
      events.push({ type: "delta", kind: "tool", text: fn["arguments"] });
  }
}

/** Tool arguments as an object: Anthropic's `input`. Arguments that are not a JSON object are kept under `_raw`. */
export function argumentsObject(text: string): Json {
  if (!text.trim()) return {};
  try {
    const value: unknown = JSON.parse(text);
    if (isObject(value)) return value;
  } catch {
    // fall through: keep what the model wrote
  }
  return { _raw: text };
}

/** One server-sent event in the `event:` + `data:` form Anthropic's and OpenAI's Responses streams use. */
export function sseFrame(type: string, data: unknown): string {
  return `event: ${type}\ndata: ${JSON.stringify(data)}\n\n`;
}

export function randomHex(length = 24): string {
  let hex = "";
  while (hex.length < length) hex += randomUUID().replaceAll("-", "");
  return hex.slice(0, length);
}
