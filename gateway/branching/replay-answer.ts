// The backbone's recorded answer given back to a branch's harness, in the shape the harness asked for: the body it
// got, whole, or the same message as a stream (ids, tool-call ids and text as recorded; chunk boundaries are not
// kept by the record, so a stream is re-cut into one chunk per part, which clients read as the same message).
import type { ServerResponse } from "node:http";
import type { ApiSurface } from "../../store/records.ts";
import { sseFrame } from "../translate/blocks.ts";
import { chatChunksFromResponse, completionChunksFromResponse } from "../upstream/chat-chunks.ts";
import { isObject, type Json } from "../upstream/fields.ts";
import { responseEvents, responseEventsProblem } from "./response-events.ts";

/** Why a recorded answer cannot be given back in this shape; null when it can. */
export function unreplayable(api: ApiSurface, stream: boolean, response: unknown): string | null {
  if (!isObject(response)) return "the backbone's recorded answer is not a JSON object";
  return stream && api === "responses" ? responseEventsProblem(response) : null;
}

function includeUsage(request: unknown): boolean {
  const options = isObject(request) ? request["stream_options"] : undefined;
  return isObject(options) && options["include_usage"] === true;
}

/** Anthropic's event stream of a whole Messages response: the events its streaming API sends for it. */
function messageEvents(message: Json): string {
  const content = Array.isArray(message["content"]) ? (message["content"] as unknown[]).filter(isObject) : [];
  const usage = isObject(message["usage"]) ? message["usage"] : {};
  let out = sseFrame("message_start", {
    type: "message_start",
    message: { ...message, content: [], stop_reason: null, stop_sequence: null, usage: { ...usage, output_tokens: 0 } },
  });
  content.forEach((block, index) => {
    const type = block["type"];
    const deltas: Json[] = [];
    let start: Json;
    if (type === "text") {
      start = { type: "text", text: "" };
      deltas.push({ type: "text_delta", text: block["text"] ?? "" });
    } else if (type === "thinking") {
      start = { type: "thinking", thinking: "", signature: "" };
      deltas.push({ type: "thinking_delta", thinking: block["thinking"] ?? "" });
      deltas.push({ type: "signature_delta", signature: block["signature"] ?? "" });
    } else if (type === "tool_use") {
      start = { type: "tool_use", id: block["id"], name: block["name"], input: {} };
      deltas.push({ type: "input_json_delta", partial_json: JSON.stringify(block["input"] ?? {}) });
    } else start = block;
    out += sseFrame("content_block_start", { type: "content_block_start", index, content_block: start });
    for (const delta of deltas) out += sseFrame("content_block_delta", { type: "content_block_delta", index, delta });
    out += sseFrame("content_block_stop", { type: "content_block_stop", index });
  });
  out += sseFrame("message_delta", {
    type: "message_delta",
    delta: { stop_reason: message["stop_reason"] ?? null, stop_sequence: message["stop_sequence"] ?? null },
    usage: { output_tokens: usage["output_tokens"] ?? 0 },
  });
  return out + sseFrame("message_stop", { type: "message_stop" });
}

function dataFrames(chunks: Json[]): string {
  return chunks.map((c) => `data: ${JSON.stringify(c)}\n\n`).join("") + "data: [DONE]\n\n";
}

/**
 * Gemini's stream of a whole GenerateContentResponse: the response as the one chunk, as server-sent events when the
 * branch's request asked with `alt=sse` (its view holds `alt`: gemini/index.ts), else as a one-element JSON array.
 */
function geminiStream(response: Json, request: unknown): { body: string; contentType: string } {
  const json = JSON.stringify(response);
  return isObject(request) && request["alt"] === "sse"
    ? { body: `data: ${json}\r\n\r\n`, contentType: "text/event-stream; charset=utf-8" }
    : { body: `[${json}\n]`, contentType: "application/json; charset=UTF-8" };
}

/** The bytes of the answer, and their content type. */
export function replayBody(
  api: ApiSurface,
  stream: boolean,
  response: Json,
  request: unknown,
): { body: string; contentType: string } {
  if (!stream) return { body: JSON.stringify(response), contentType: "application/json" };
  if (api === "gemini") return geminiStream(response, request);
  const options = { includeUsage: includeUsage(request) };
  const body =
    api === "messages"
      ? messageEvents(response)
      : api === "responses"
        ? responseEvents(response)
        : dataFrames(
            api === "completions"
              ? completionChunksFromResponse(response, options)
              : chatChunksFromResponse(response, options),
          );
  return { body, contentType: "text/event-stream; charset=utf-8" };
}

export function sendReplay(
  res: ServerResponse,
  answer: { body: string; contentType: string },
  headers: Record<string, string>,
): void {
  res.writeHead(200, {
    "content-type": answer.contentType,
    "content-length": Buffer.byteLength(answer.body),
    ...headers,
  });
  res.end(answer.body);
}
