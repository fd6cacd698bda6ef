// Writes an OpenAI Responses response from the upstream's chat chunks: `response.created`, `response.in_progress`,
// per output item `response.output_item.added` … `response.output_item.done` (reasoning items with
// `response.reasoning_text.delta`, messages with `response.content_part.added` / `response.output_text.delta` /
// `.done` / `response.content_part.done`, function calls with `response.function_call_arguments.delta` / `.done`;
// custom_tool_call and local_shell_call items, whose fields are read from the function's whole arguments, complete
// with `response.output_item.done` — custom ones after `response.custom_tool_call_input.done`),
// then `response.completed` (or `response.incomplete` when max_output_tokens cut the answer). Every event carries a
// `sequence_number`. The Response object a non-streamed call returns is built from the same events.
import type { TranslationEncoder } from "../../relay/translated.ts";
import { ChatBlockSplitter, randomHex, sseFrame, type BlockEvent } from "../../translate/blocks.ts";
import { isObject, type Json } from "../../upstream/fields.ts";
import { encodeReasoning } from "../../translate/carried-reasoning.ts";
import type { ResponsesRequest } from "./request.ts";
import { outputItemOf, ResponsesToolMap } from "./tools.ts";

/** The fields of a Response that echo the request. */
function echoed(request: ResponsesRequest): Json {
  const reasoning = isObject(request["reasoning"]) ? request["reasoning"] : {};
  return {
    instructions: request["instructions"] ?? null,
    max_output_tokens: request["max_output_tokens"] ?? null,
    model: request.model,
    parallel_tool_calls: request["parallel_tool_calls"] ?? true,
    previous_response_id: request.previous_response_id ?? null,
    reasoning: { effort: reasoning["effort"] ?? null, summary: reasoning["summary"] ?? null },
    store: request["store"] ?? true,
    temperature: request["temperature"] ?? 1,
    text: request["text"] ?? { format: { type: "text" } },
    tool_choice: request["tool_choice"] ?? "auto",
    tools: request["tools"] ?? [],
    top_p: request["top_p"] ?? 1,
    truncation: request["truncation"] ?? "disabled",
    user: request["user"] ?? null,
    metadata: request["metadata"] ?? {},
  };
}

export class ResponsesEncoder implements TranslationEncoder {
  readonly #splitter = new ChatBlockSplitter();
  readonly #response: Json;
  readonly #output: Json[] = [];
  readonly #encryptReasoning: boolean;
  readonly #tools: ResponsesToolMap;
  /** The function the open tool block calls (as named upstream). */
  #toolFunction = "";
  #pendingArgs = "";
  #seq = 0;
  #started = false;

  constructor(request: ResponsesRequest, tools: ResponsesToolMap = ResponsesToolMap.empty()) {
    this.#tools = tools;
    const include = request["include"];
    this.#encryptReasoning = Array.isArray(include) && include.includes("reasoning.encrypted_content");
    this.#response = {
      id: `resp_${randomHex(48)}`,
      object: "response",
      created_at: Math.floor(Date.now() / 1000),
      status: "in_progress",
      background: false,
      error: null,
      incomplete_details: null,
      output: this.#output,
      usage: null,
      ...echoed(request),
    };
  }

  get id(): string {
    return this.#response["id"] as string;
  }

  setPromptTokens(count: number | null): void {
    this.#splitter.promptTokens = count;
  }

  #frame(type: string, fields: Json): string {
    return sseFrame(type, { type, sequence_number: this.#seq++, ...fields });
  }

  #start(): string {
    if (this.#started) return "";
    this.#started = true;
    const response = { ...this.#response, output: [] };
    return this.#frame("response.created", { response }) + this.#frame("response.in_progress", { response });
  }

  chunk(chunk: Json): string {
    const events = this.#splitter.push(chunk);
    return this.#start() + events.map((e) => this.#event(e)).join("");
  }

  #event(event: BlockEvent): string {
    if (event.type === "start") {
      if (event.kind === "tool") this.#toolFunction = event.name;
      const item: Json =
        event.kind === "reasoning"
          ? { id: `rs_${randomHex(48)}`, type: "reasoning", summary: [], content: [] }
          : event.kind === "text"
            ? { id: `msg_${randomHex(48)}`, type: "message", status: "in_progress", role: "assistant", content: [] }
            : outputItemOf(
                { id: `fc_${randomHex(48)}`, call_id: event.id, status: "in_progress" },
                event.name,
                "",
                this.#tools,
              );
      this.#output.push(item);
      const output_index = this.#output.length - 1;
      let frames = this.#frame("response.output_item.added", { output_index, item: structuredClone(item) });
      if (event.kind !== "tool") {
        const part =
          event.kind === "reasoning"
            ? { type: "reasoning_text", text: "" }
            : { type: "output_text", text: "", annotations: [], logprobs: [] };
        (item["content"] as Json[]).push(part);
        frames += this.#frame("response.content_part.added", {
          item_id: item["id"],
          output_index,
          content_index: 0,
          part: { ...part },
        });
      }
      return frames;
    }
    const output_index = this.#output.length - 1;
    const item = this.#output[output_index]!;
    const where = { item_id: item["id"], output_index };
    const part = event.kind === "tool" ? null : ((item["content"] as Json[])[0] as Json);
    if (event.type === "delta") {
      if (part === null) {
        const args = String(item["arguments"] ?? "") + event.text;
        if (item["type"] !== "function_call") {
          // Its fields come from the whole arguments: kept aside until the call is complete.
          this.#pendingArgs += event.text;
          return "";
        }
        item["arguments"] = args;
        return this.#frame("response.function_call_arguments.delta", { ...where, delta: event.text });
      }
      part["text"] = String(part["text"]) + event.text;
      if (event.kind === "reasoning")
        return this.#frame("response.reasoning_text.delta", { ...where, content_index: 0, delta: event.text });
      return this.#frame("response.output_text.delta", { ...where, content_index: 0, delta: event.text, logprobs: [] });
    }
    let frames = "";
    if (part === null && item["type"] !== "function_call") {
      const done = outputItemOf(
        { id: String(item["id"]), call_id: String(item["call_id"]), status: "completed" },
        this.#toolFunction,
        this.#pendingArgs,
        this.#tools,
      );
      this.#pendingArgs = "";
      this.#output[output_index] = done;
      if (done["type"] === "custom_tool_call")
        frames += this.#frame("response.custom_tool_call_input.done", { ...where, input: done["input"] });
      return frames + this.#frame("response.output_item.done", { output_index, item: structuredClone(done) });
    }
    if (part === null) {
      frames += this.#frame("response.function_call_arguments.done", {
        ...where,
        name: item["name"],
        arguments: item["arguments"],
      });
      item["status"] = "completed";
    } else {
      const done = event.kind === "reasoning" ? "response.reasoning_text.done" : "response.output_text.done";
      frames += this.#frame(done, {
        ...where,
        content_index: 0,
        text: part["text"],
        ...(event.kind === "text" ? { logprobs: [] } : {}),
      });
      frames += this.#frame("response.content_part.done", { ...where, content_index: 0, part: { ...part } });
      if (event.kind === "text") item["status"] = "completed";
      if (event.kind === "reasoning" && this.#encryptReasoning)
        item["encrypted_content"] = encodeReasoning(String(part["text"]));
    }
    return frames + this.#frame("response.output_item.done", { output_index, item: structuredClone(item) });
  }

  finish(): { frames: string; last: string } {
    const { events, end } = this.#splitter.end();
    const frames = this.#start() + events.map((e) => this.#event(e)).join("");
    const input = end.promptTokens ?? 0;
    const output = end.completionTokens ?? 0;
    this.#response["usage"] = {
      input_tokens: input,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens: output,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: input + output,
    };
    const cut = end.finishReason === "length";
    this.#response["status"] = cut ? "incomplete" : "completed";
    if (cut) this.#response["incomplete_details"] = { reason: "max_output_tokens" };
    const last = this.#frame(cut ? "response.incomplete" : "response.completed", { response: this.snapshot() });
    return { frames, last };
  }

  snapshot(): Json {
    return structuredClone(this.#response);
  }

  failureFrame(message: string): string {
    this.#response["status"] = "failed";
    this.#response["error"] = { code: "server_error", message: `upstream failed mid-answer: ${message}` };
    return this.#frame("response.failed", { response: this.snapshot() });
  }
}
