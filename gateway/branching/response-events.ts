// The event stream of a whole Responses response, for replaying a streamed Responses call to a branch's harness: the
// events the gateway's Responses encoder (gateway/surfaces/responses/encoder.ts) sends for the same output items, in
// the same order and shapes, each item's text or arguments in one delta (the record keeps the response, not where
// its deltas were cut). Items other than reasoning, message, function, custom tool and local shell calls are not
// rebuilt: the call is then not replayed (a divergence).
import { sseFrame } from "../translate/blocks.ts";
import { isObject, type Json } from "../upstream/fields.ts";

const ITEM_TYPES = new Set(["reasoning", "message", "function_call", "custom_tool_call", "local_shell_call"]);

/** Why the response's events cannot be rebuilt; null when they can. */
export function responseEventsProblem(response: Json): string | null {
  const output = response["output"];
  if (!Array.isArray(output)) return "the backbone's Responses answer has no output list";
  for (const item of output) {
    if (!isObject(item) || !ITEM_TYPES.has(String(item["type"])))
      return `a streamed Responses call with a ${isObject(item) ? String(item["type"]) : "malformed"} output item is not replayed`;
    const content = item["content"];
    if (
      (item["type"] === "reasoning" || item["type"] === "message") &&
      (!Array.isArray(content) || content.length !== 1)
    )
      return `a streamed Responses call whose ${String(item["type"])} item has ${Array.isArray(content) ? content.length : 0} content parts is not replayed`;
  }
  return null;
}

/** The item as `response.output_item.added` showed it, before any of its text or arguments. */
function addedItem(item: Json): Json {
  switch (item["type"]) {
    case "reasoning": {
      const { encrypted_content: _secret, ...rest } = item;
      return { ...rest, content: [] };
    }
    case "message":
      return { ...item, status: "in_progress", content: [] };
    case "function_call":
      return { ...item, status: "in_progress", arguments: "" };
    case "custom_tool_call":
      return { ...item, status: "in_progress", input: "" };
    default: {
      const action = { type: "exec", command: [], timeout_ms: null, working_directory: null, env: null, user: null };
      return { ...item, status: "in_progress", action };
    }
  }
}

/** `response.created` … `response.completed` (or `.incomplete`) for a whole response. */
export function responseEvents(response: Json): string {
  let seq = 0;
  const frame = (type: string, fields: Json) => sseFrame(type, { type, sequence_number: seq++, ...fields });
  const output = (response["output"] as Json[]) ?? [];
  const opening = { ...response, status: "in_progress", incomplete_details: null, output: [], usage: null };
  let out = frame("response.created", { response: opening }) + frame("response.in_progress", { response: opening });
  output.forEach((item, output_index) => {
    const where = { item_id: item["id"], output_index };
    out += frame("response.output_item.added", { output_index, item: addedItem(item) });
    const type = item["type"];
    if (type === "reasoning" || type === "message") {
      const part = (item["content"] as Json[])[0]!;
      const text = String(part["text"] ?? "");
      const empty = type === "reasoning" ? { ...part, text: "" } : { ...part, text: "", logprobs: [] };
      out += frame("response.content_part.added", { ...where, content_index: 0, part: empty });
      if (type === "reasoning") {
        out += frame("response.reasoning_text.delta", { ...where, content_index: 0, delta: text });
        out += frame("response.reasoning_text.done", { ...where, content_index: 0, text });
      } else {
        out += frame("response.output_text.delta", { ...where, content_index: 0, delta: text, logprobs: [] });
        out += frame("response.output_text.done", { ...where, content_index: 0, text, logprobs: [] });
      }
      out += frame("response.content_part.done", { ...where, content_index: 0, part });
    } else if (type === "function_call") {
      const args = String(item["arguments"] ?? "");
      out += frame("response.function_call_arguments.delta", { ...where, delta: args });
      out += frame("response.function_call_arguments.done", { ...where, name: item["name"], arguments: args });
    } else if (type === "custom_tool_call") {
      out += frame("response.custom_tool_call_input.done", { ...where, input: item["input"] });
    }
    out += frame("response.output_item.done", { output_index, item });
  });
  const last = response["status"] === "incomplete" ? "response.incomplete" : "response.completed";
  return out + frame(last, { response });
}
