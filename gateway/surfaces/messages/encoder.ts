// Writes an Anthropic Messages response from the upstream's chat chunks: the streaming events (`message_start`,
// `ping`, `content_block_start` / `content_block_delta` (text_delta, thinking_delta + signature_delta,
// input_json_delta) / `content_block_stop`, `message_delta`, `message_stop`) and, from the same events, the Message
// object a non-streamed call returns.
//   finish_reason tool_calls → stop_reason tool_use; length → max_tokens; a matched stop string → stop_sequence;
//   otherwise end_turn. Reasoning becomes thinking blocks; their signature is a fixed marker (rlgate cannot sign),
//   which clients echo back and rlgate ignores.
import type { TranslationEncoder } from "../../relay/translated.ts";
import {
  ChatBlockSplitter,
  argumentsObject,
  randomHex,
  sseFrame,
  type BlockEvent,
  type ChatEnd,
} from "../../translate/blocks.ts";
import type { Json } from "../../upstream/fields.ts";

export const THINKING_SIGNATURE = "rlgate-unsigned";

function stopReason(end: ChatEnd, sawTool: boolean): { stop_reason: string; stop_sequence: string | null } {
  if (end.finishReason === "tool_calls" && sawTool) return { stop_reason: "tool_use", stop_sequence: null };
  if (end.finishReason === "length") return { stop_reason: "max_tokens", stop_sequence: null };
  if (end.stopSequence !== null) return { stop_reason: "stop_sequence", stop_sequence: end.stopSequence };
  return { stop_reason: "end_turn", stop_sequence: null };
}

export class MessagesEncoder implements TranslationEncoder {
  readonly #splitter = new ChatBlockSplitter();
  readonly #message: Json;
  readonly #content: Json[] = [];
  #started = false;
  #toolArgs = "";
  #sawTool = false;

  constructor(model: string) {
    this.#message = {
      id: `msg_${randomHex(24)}`,
      type: "message",
      role: "assistant",
      model,
      content: this.#content,
      stop_reason: null,
      stop_sequence: null,
      usage: { input_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 0 },
    };
  }

  setPromptTokens(count: number | null): void {
    this.#splitter.promptTokens = count;
  }

  chunk(chunk: Json): string {
    const events = this.#splitter.push(chunk);
    return this.#start() + events.map((e) => this.#event(e)).join("");
  }

  #usage(): Json {
    return this.#message["usage"] as Json;
  }

  #start(): string {
    if (this.#started) return "";
    this.#started = true;
    this.#usage()["input_tokens"] = this.#splitter.promptTokens ?? 0;
    const message = { ...this.#message, content: [], usage: { ...this.#usage(), output_tokens: 1 } };
    return sseFrame("message_start", { type: "message_start", message }) + sseFrame("ping", { type: "ping" });
  }

  #event(event: BlockEvent): string {
    const index = this.#content.length - 1;
    if (event.type === "start") {
      const block: Json =
        event.kind === "reasoning"
          ? { type: "thinking", thinking: "", signature: "" }
          : event.kind === "text"
            ? { type: "text", text: "" }
            : { type: "tool_use", id: event.id, name: event.name, input: {} };
      if (event.kind === "tool") {
        this.#toolArgs = "";
        this.#sawTool = true;
      }
      this.#content.push(block);
      return sseFrame("content_block_start", {
        type: "content_block_start",
        index: index + 1,
        content_block: { ...block },
      });
    }
    const block = this.#content[index]!;
    if (event.type === "delta") {
      if (event.kind === "reasoning") {
        block["thinking"] = String(block["thinking"]) + event.text;
        return sseFrame("content_block_delta", {
          type: "content_block_delta",
          index,
          delta: { type: "thinking_delta", thinking: event.text },
        });
      }
      if (event.kind === "text") {
        block["text"] = String(block["text"]) + event.text;
        return sseFrame("content_block_delta", {
          type: "content_block_delta",
          index,
          delta: { type: "text_delta", text: event.text },
        });
      }
      this.#toolArgs += event.text;
      return sseFrame("content_block_delta", {
        type: "content_block_delta",
        index,
        delta: { type: "input_json_delta", partial_json: event.text },
      });
    }
    let frames = "";
    if (event.kind === "reasoning") {
      block["signature"] = THINKING_SIGNATURE;
      frames += sseFrame("content_block_delta", {
        type: "content_block_delta",
        index,
        delta: { type: "signature_delta", signature: THINKING_SIGNATURE },
      });
    }
    if (event.kind === "tool") block["input"] = argumentsObject(this.#toolArgs);
    return frames + sseFrame("content_block_stop", { type: "content_block_stop", index });
  }

  finish(): { frames: string; last: string } {
    const { events, end } = this.#splitter.end();
    let frames = this.#start() + events.map((e) => this.#event(e)).join("");
    const reason = stopReason(end, this.#sawTool);
    Object.assign(this.#message, reason);
    const usage = this.#usage();
    if (end.promptTokens !== null) usage["input_tokens"] = end.promptTokens;
    usage["output_tokens"] = end.completionTokens ?? 0;
    frames += sseFrame("message_delta", {
      type: "message_delta",
      delta: reason,
      usage: { input_tokens: usage["input_tokens"], output_tokens: usage["output_tokens"] },
    });
    return { frames, last: sseFrame("message_stop", { type: "message_stop" }) };
  }

  snapshot(): Json {
    return structuredClone(this.#message);
  }

  failureFrame(message: string): string {
    return sseFrame("error", {
      type: "error",
      error: { type: "api_error", message: `upstream failed mid-answer: ${message}` },
    });
  }
}
