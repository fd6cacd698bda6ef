// An OpenAI Responses request, checked and translated to the chat completion the upstream runs:
//   instructions                          → a system message (not carried over by previous_response_id, as OpenAI)
//   input: string                         → one user message
//   message items (user/system/developer) → user / system messages (input_text and input_image parts)
//   reasoning, assistant message and function_call items in a row → one assistant message
//                                           (reasoning under both names, content, tool_calls)
//   custom_tool_call, local_shell_call    → tool calls of that assistant message (tools.ts maps names and arguments)
//   function_call_output, custom_tool_call_output → a tool message
//   tools (function, namespace, custom, local_shell), tool_choice, max_output_tokens, text.format, reasoning.effort,
//   sampling                              → their chat counterparts (tools.ts)
// Hosted tools and the items they leave in the history (web_search_call, tool_search_call, image_generation_call, …),
// which a chat-completions upstream cannot run or show its model, are dropped with a warning recorded on the call.
// What cannot be carried at all (item_reference, file inputs) is refused with a 400 naming it.
import { setReasoning } from "../../../tokenizer/reasoning-field.ts";
import { GatewayError } from "../../errors.ts";
import { decodeReasoning } from "../../translate/carried-reasoning.ts";
import { isObject, shown, textField, type Json } from "../../upstream/fields.ts";
import { chatTools, ResponsesToolMap, toolCallOf } from "./tools.ts";

export interface ResponsesRequest extends Json {
  model: string;
  stream?: boolean;
  previous_response_id?: string | null;
}

function invalid(param: string, message: string): GatewayError {
  return new GatewayError("RLGATE_BAD_REQUEST", `invalid request: ${param}: ${message}`, { param });
}

export function parseResponsesRequest(body: unknown): ResponsesRequest {
  if (!isObject(body)) throw new GatewayError("RLGATE_BAD_REQUEST", "request body must be a JSON object");
  if (typeof body["model"] !== "string" || !body["model"]) throw invalid("model", "a model name string is required");
  const input = body["input"];
  if (input !== undefined && typeof input !== "string" && !(Array.isArray(input) && input.every(isObject))) {
    throw invalid("input", "expected a string or an array of input items");
  }
  if (body["instructions"] != null && typeof body["instructions"] !== "string")
    throw invalid("instructions", "expected a string");
  if (body["stream"] != null && typeof body["stream"] !== "boolean") throw invalid("stream", "expected a boolean");
  const previous = body["previous_response_id"];
  if (previous != null && typeof previous !== "string") throw invalid("previous_response_id", "expected a string");
  return body as ResponsesRequest;
}

function texts(parts: unknown, types: readonly string[]): string[] {
  if (!Array.isArray(parts)) return [];
  return parts
    .filter(
      (p) => isObject(p) && typeof p["type"] === "string" && types.includes(p["type"]) && typeof p["text"] === "string",
    )
    .map((p) => (p as Json)["text"] as string);
}

function userContent(content: unknown, where: string): string | Json[] {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) throw invalid(where, "expected a string or an array of content parts");
  const parts = content.map((part, k) => {
    if (!isObject(part)) throw invalid(`${where}.${k}`, "each content part must be an object");
    switch (part["type"]) {
      case "input_text":
      case "output_text":
      case "text":
        return { type: "text", text: textField(part["text"], `${where}.${k}.text`) };
      case "input_image":
        if (typeof part["image_url"] === "string") return { type: "image_url", image_url: { url: part["image_url"] } };
        throw invalid(`${where}.${k}`, "input_image parts need an image_url (file ids cannot be resolved by rlgate)");
      default:
        throw invalid(
          `${where}.${k}`,
          `content parts of type '${shown(part["type"])}' cannot be passed to a chat-completions upstream`,
        );
    }
  });
  const [only] = parts;
  return parts.length === 1 && only?.type === "text" ? String(only.text) : parts;
}

function toolOutput(output: unknown, where: string, warnings: string[]): string {
  if (typeof output === "string") return output;
  if (isObject(output) && typeof output["content"] === "string") return output["content"];
  if (
    Array.isArray(output) &&
    output.some((p) => isObject(p) && p["type"] !== "input_text" && p["type"] !== "output_text" && p["type"] !== "text")
  ) {
    warnings.push(`${where}.output: parts other than text dropped (tool messages carry text)`);
  }
  return texts(output, ["input_text", "output_text", "text"]).join("\n");
}

/** Items hosted tools leave in a history: the upstream's model never made them and cannot be shown them. */
const HOSTED_ITEMS = new Set([
  "web_search_call",
  "file_search_call",
  "image_generation_call",
  "code_interpreter_call",
  "computer_call",
  "computer_call_output",
  "mcp_call",
  "mcp_list_tools",
  "mcp_approval_request",
  "mcp_approval_response",
  "tool_search_call",
  "tool_search_output",
  "compaction",
  "compaction_summary",
  "context_compaction",
]);

export interface InputOptions {
  /** Names the field in errors and warnings. */
  where?: string;
  /** The request's tools: how namespaced, custom and local_shell calls are named upstream. */
  tools?: ResponsesToolMap;
  /** Collects what was dropped. */
  warnings?: string[];
}

/** The chat messages for an input (string or items). */
export function inputMessages(input: unknown, options: InputOptions = {}): Json[] {
  const where = options.where ?? "input";
  const map = options.tools ?? ResponsesToolMap.empty();
  const warnings = options.warnings ?? [];
  if (input === undefined || input === null) return [];
  if (typeof input === "string") return [{ role: "user", content: input }];
  const messages: Json[] = [];
  let assistant: Json | null = null;
  const flush = (): void => {
    if (assistant) messages.push(assistant);
    assistant = null;
  };
  const open = (): Json => (assistant ??= { role: "assistant", content: "" });
  (input as Json[]).forEach((item, i) => {
    const at = `${where}.${i}`;
    const type = item["type"] ?? (typeof item["role"] === "string" ? "message" : undefined);
    switch (type) {
      case "message": {
        const role = item["role"];
        if (role === "assistant") {
          if (assistant?.["tool_calls"]) flush();
          const text =
            typeof item["content"] === "string"
              ? item["content"]
              : texts(item["content"], ["output_text", "input_text", "text", "refusal"]).join("");
          const message = open();
          message["content"] = String(message["content"]) + text;
          return;
        }
        flush();
        if (role === "user") messages.push({ role: "user", content: userContent(item["content"], `${at}.content`) });
        else if (role === "system" || role === "developer")
          messages.push({ role: "system", content: userContent(item["content"], `${at}.content`) });
        else throw invalid(`${at}.role`, `expected user, assistant, system or developer, got ${JSON.stringify(role)}`);
        return;
      }
      case "reasoning": {
        if (assistant && (assistant["content"] || assistant["tool_calls"])) flush();
        const text =
          texts(item["content"], ["reasoning_text"]).join("") ||
          decodeReasoning(item["encrypted_content"]) ||
          texts(item["summary"], ["summary_text"]).join("\n");
        const message = open();
        setReasoning(message, String(message["reasoning"] ?? "") + text);
        return;
      }
      case "function_call":
      case "custom_tool_call":
      case "local_shell_call": {
        const message = open();
        const calls = (message["tool_calls"] ??= []) as Json[];
        calls.push(toolCallOf(item, map, at));
        return;
      }
      case "function_call_output":
      case "custom_tool_call_output":
      case "local_shell_call_output":
        flush();
        messages.push({
          role: "tool",
          tool_call_id: textField(item["call_id"], `${at}.call_id`),
          content: toolOutput(item["output"], at, warnings),
        });
        return;
      default:
        if (typeof type === "string" && HOSTED_ITEMS.has(type)) {
          warnings.push(`${at}: '${type}' item dropped: a chat-completions upstream's model cannot be shown it`);
          return;
        }
        throw invalid(
          `${at}.type`,
          `input items of type '${shown(type)}' cannot be passed to a chat-completions upstream`,
        );
    }
  });
  flush();
  return messages;
}

function chatToolChoice(choice: unknown, map: ResponsesToolMap): unknown {
  if (choice == null || choice === "auto" || choice === "none" || choice === "required") return choice ?? undefined;
  if (
    isObject(choice) &&
    (choice["type"] === "function" || choice["type"] === "custom") &&
    typeof choice["name"] === "string"
  ) {
    const namespace = typeof choice["namespace"] === "string" ? choice["namespace"] : null;
    return { type: "function", function: { name: map.functionName(choice["name"], namespace) } };
  }
  // A hosted tool (dropped) or an allowed_tools list: the model chooses among what it was given.
  if (isObject(choice)) return "auto";
  throw invalid("tool_choice", "expected auto, none, required or {type:'function', name}");
}

function responseFormat(text: unknown): Json | undefined {
  if (!isObject(text) || !isObject(text["format"])) return undefined;
  const format = text["format"];
  if (format["type"] === "json_schema") {
    return {
      type: "json_schema",
      json_schema: { name: format["name"] ?? "response", schema: format["schema"], strict: format["strict"] ?? null },
    };
  }
  if (format["type"] === "json_object") return { type: "json_object" };
  return undefined;
}

export interface ChatTranslation {
  chat: Json;
  /** The chat messages this response's successor (previous_response_id) continues from. */
  conversation: Json[];
  /** How the upstream's function calls map back to the harness's tools. */
  tools: ResponsesToolMap;
  /** What was dropped on the way (hosted tools, their items, non-text tool output parts). */
  warnings: string[];
}

/**
 * The chat-completions request for a Responses request. `history` is the conversation of the previous response
 * (its input and output as chat messages).
 */
export function toChatRequest(request: ResponsesRequest, history: readonly Json[]): ChatTranslation {
  const warnings: string[] = [];
  const { tools, map } = chatTools(request["tools"], warnings);
  const conversation = [...history, ...inputMessages(request["input"], { tools: map, warnings })];
  const messages =
    typeof request["instructions"] === "string" && request["instructions"]
      ? [{ role: "system", content: request["instructions"] }, ...conversation]
      : conversation;
  const chat: Json = { model: request.model, messages };
  if (request.stream === true) {
    chat["stream"] = true;
    chat["stream_options"] = { include_usage: true };
  }
  if (tools?.length) {
    chat["tools"] = tools;
    const choice = chatToolChoice(request["tool_choice"], map);
    if (choice !== undefined) chat["tool_choice"] = choice;
  }
  if (typeof request["parallel_tool_calls"] === "boolean") chat["parallel_tool_calls"] = request["parallel_tool_calls"];
  if (typeof request["max_output_tokens"] === "number") chat["max_tokens"] = request["max_output_tokens"];
  for (const key of ["temperature", "top_p"]) if (typeof request[key] === "number") chat[key] = request[key];
  const format = responseFormat(request["text"]);
  if (format) chat["response_format"] = format;
  const reasoning = request["reasoning"];
  if (isObject(reasoning) && (reasoning["effort"] === "none" || reasoning["effort"] === "minimal")) {
    chat["chat_template_kwargs"] = { enable_thinking: false };
  }
  return { chat, conversation, tools: map, warnings };
}
