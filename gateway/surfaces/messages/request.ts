// An Anthropic Messages request, checked and translated to the chat completion the upstream runs:
//   system (string or text blocks), and system messages among the turns → system messages in place
//   text / image blocks                  → content parts (images as data: or https: image_url parts; the upstream
//                                          decides whether its model takes them)
//   tool_result blocks (user turn)       → tool messages, before the rest of that user turn
//   assistant text / thinking / tool_use → content / reasoning (both names) / tool_calls of one assistant message
//   tools, tool_choice, stop_sequences, thinking, sampling parameters → their chat-completions counterparts
//   thinking {type: enabled | adaptive | disabled} → the template's enable_thinking (budget_tokens has no counterpart)
//   cache_control on any block                     → nothing (prefix caching is the upstream's own)
// What the upstream cannot take is dropped with a warning recorded on the call, the rest of the request goes on:
// server tools (web_search, web_fetch, code_execution, …) and Anthropic-defined client tools without a schema,
// images and documents inside tool results (tool messages carry text), non-text documents, and the blocks server
// tools leave in a history (server_tool_use, *_tool_result). What is malformed is refused with a 400 that names it.
import { setReasoning } from "../../../tokenizer/reasoning-field.ts";
import { GatewayError } from "../../errors.ts";
import { contentOf } from "../../translate/chat-content.ts";
import { isObject, shown, textField, type Json } from "../../upstream/fields.ts";

export interface MessagesRequest extends Json {
  model: string;
  max_tokens: number;
  messages: Json[];
  stream?: boolean;
}

function invalid(param: string, message: string): GatewayError {
  return new GatewayError("RLGATE_BAD_REQUEST", `${param}: ${message}`, { param });
}

/** `countOnly`: a count_tokens request, which has no max_tokens. */
export function parseMessagesRequest(body: unknown, options: { countOnly?: boolean } = {}): MessagesRequest {
  if (!isObject(body)) throw new GatewayError("RLGATE_BAD_REQUEST", "request body must be a JSON object");
  if (typeof body["model"] !== "string" || !body["model"])
    throw invalid("model", "Field required (a model name string)");
  const maxTokens = body["max_tokens"];
  if (!options.countOnly && (typeof maxTokens !== "number" || !Number.isInteger(maxTokens) || maxTokens < 1)) {
    throw invalid("max_tokens", "Field required (an integer ≥ 1)");
  }
  const messages = body["messages"];
  if (!Array.isArray(messages)) throw invalid("messages", "Field required (an array of messages)");
  messages.forEach((message, i) => {
    if (!isObject(message)) throw invalid(`messages.${i}`, "each message must be an object");
    // Claude Code 2.1 also sends `system` messages between the turns (e.g. the list of agent types).
    if (message["role"] !== "user" && message["role"] !== "assistant" && message["role"] !== "system") {
      throw invalid(
        `messages.${i}.role`,
        `expected 'user', 'assistant' or 'system', got ${JSON.stringify(message["role"])}`,
      );
    }
    const content = message["content"];
    if (typeof content !== "string" && !(Array.isArray(content) && content.every(isObject))) {
      throw invalid(`messages.${i}.content`, "expected a string or an array of content blocks");
    }
  });
  if (body["stream"] !== undefined && typeof body["stream"] !== "boolean")
    throw invalid("stream", "expected a boolean");
  return body as MessagesRequest;
}

type ChatPart = Json;

function blocksOf(content: unknown): Json[] {
  return typeof content === "string" ? [{ type: "text", text: content }] : (content as Json[]);
}

function imagePart(block: Json, where: string): ChatPart {
  const source = block["source"];
  if (isObject(source) && source["type"] === "base64" && typeof source["data"] === "string") {
    return {
      type: "image_url",
      image_url: {
        url: `data:${textField(source["media_type"], `${where}.source.media_type`, "image/png")};base64,${source["data"]}`,
      },
    };
  }
  if (isObject(source) && source["type"] === "url" && typeof source["url"] === "string") {
    return { type: "image_url", image_url: { url: source["url"] } };
  }
  throw invalid(where, "image blocks need a base64 or url source");
}

function userPart(block: Json, where: string, warnings: string[]): ChatPart | null {
  switch (block["type"]) {
    case "text":
      return { type: "text", text: textField(block["text"], `${where}.text`) };
    case "image":
      return imagePart(block, where);
    case "document": {
      const source = block["source"];
      if (isObject(source) && source["type"] === "text" && typeof source["data"] === "string") {
        return { type: "text", text: source["data"] };
      }
      warnings.push(`${where}: a document block that is not plain text dropped`);
      return null;
    }
    default:
      warnings.push(`${where}: '${shown(block["type"])}' block dropped: a chat-completions upstream cannot take it`);
      return null;
  }
}

function toolResultContent(block: Json, where: string, warnings: string[]): string | ChatPart[] {
  const content = block["content"];
  if (content === undefined || content === null) return "";
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) throw invalid(where, "tool_result content must be a string or an array of blocks");
  const parts: ChatPart[] = [];
  content.filter(isObject).forEach((part, k) => {
    if (part["type"] === "text")
      parts.push({ type: "text", text: textField(part["text"], `${where}.content.${k}.text`) });
    else
      warnings.push(
        `${where}.content.${k}: '${shown(part["type"])}' block inside tool_result dropped (tool messages carry text)`,
      );
  });
  return parts.length ? contentOf(parts) : "";
}

function userMessages(message: Json, i: number, warnings: string[]): Json[] {
  const out: Json[] = [];
  const parts: ChatPart[] = [];
  blocksOf(message["content"]).forEach((block, k) => {
    const where = `messages.${i}.content.${k}`;
    if (block["type"] === "tool_result") {
      out.push({
        role: "tool",
        tool_call_id: textField(block["tool_use_id"], `${where}.tool_use_id`),
        content: toolResultContent(block, where, warnings),
      });
    } else {
      const part = userPart(block, where, warnings);
      if (part) parts.push(part);
    }
  });
  if (parts.length) out.push({ role: "user", content: contentOf(parts) });
  return out;
}

function assistantMessage(message: Json, i: number, warnings: string[]): Json {
  let text = "";
  let reasoning: string | null = null;
  const toolCalls: Json[] = [];
  blocksOf(message["content"]).forEach((block, k) => {
    switch (block["type"]) {
      case "text":
        text += textField(block["text"], `messages.${i}.content.${k}.text`);
        break;
      case "thinking":
        reasoning = (reasoning ?? "") + textField(block["thinking"], `messages.${i}.content.${k}.thinking`);
        break;
      case "redacted_thinking":
        break;
      case "tool_use":
        toolCalls.push({
          id: textField(block["id"], `messages.${i}.content.${k}.id`),
          type: "function",
          function: {
            name: textField(block["name"], `messages.${i}.content.${k}.name`),
            arguments: JSON.stringify(block["input"] ?? {}),
          },
        });
        break;
      default:
        // server_tool_use, web_search_tool_result and the like: the upstream's model never made them.
        warnings.push(
          `messages.${i}.content.${k}: assistant '${shown(block["type"])}' block dropped: a chat-completions upstream's model cannot be shown it`,
        );
    }
  });
  const out: Json = { role: "assistant", content: text };
  if (reasoning !== null) setReasoning(out, reasoning);
  if (toolCalls.length) out["tool_calls"] = toolCalls;
  return out;
}

function systemMessage(system: unknown, where = "system"): Json | null {
  if (system === undefined || system === null) return null;
  if (typeof system === "string") return system ? { role: "system", content: system } : null;
  if (!Array.isArray(system)) throw invalid(where, "expected a string or an array of text blocks");
  const parts = system.map((block, k) => {
    if (!isObject(block) || block["type"] !== "text")
      throw invalid(`${where}.${k}`, "system blocks must be text blocks");
    return { type: "text", text: textField(block["text"], `${where}.${k}.text`) };
  });
  return parts.length ? { role: "system", content: contentOf(parts) } : null;
}

function chatTools(tools: unknown, warnings: string[]): Json[] | undefined {
  if (tools === undefined || tools === null) return undefined;
  if (!Array.isArray(tools)) throw invalid("tools", "expected an array of tools");
  const out: Json[] = [];
  tools.forEach((tool, k) => {
    if (!isObject(tool) || typeof tool["name"] !== "string") throw invalid(`tools.${k}`, "each tool needs a name");
    if (tool["type"] !== undefined && tool["type"] !== null && tool["type"] !== "custom") {
      warnings.push(
        `tools.${k}: '${shown(tool["type"])}' tool '${tool["name"]}' dropped: a chat-completions upstream cannot run it (declare it as a custom tool with an input_schema)`,
      );
      return;
    }
    const fn: Json = { name: tool["name"], parameters: tool["input_schema"] ?? { type: "object", properties: {} } };
    if (typeof tool["description"] === "string") fn["description"] = tool["description"];
    out.push({ type: "function", function: fn });
  });
  return out;
}

function chatToolChoice(choice: unknown, out: Json): void {
  if (!isObject(choice)) return;
  if (choice["disable_parallel_tool_use"] === true) out["parallel_tool_calls"] = false;
  switch (choice["type"]) {
    case "auto":
      out["tool_choice"] = "auto";
      break;
    case "any":
      out["tool_choice"] = "required";
      break;
    case "none":
      out["tool_choice"] = "none";
      break;
    case "tool":
      out["tool_choice"] = { type: "function", function: { name: textField(choice["name"], "tool_choice.name") } };
      break;
    default:
      throw invalid("tool_choice.type", `expected auto, any, tool or none, got ${JSON.stringify(choice["type"])}`);
  }
}

/** Features Anthropic's servers run that a chat-completions upstream has no counterpart for: not applied, said so. */
function ignoredServerFeatures(request: MessagesRequest, warnings: string[]): void {
  const management = request["context_management"];
  const edits = isObject(management) && Array.isArray(management["edits"]) ? management["edits"].filter(isObject) : [];
  if (edits.length)
    warnings.push(
      `context_management: edits not applied (${edits.map((e) => shown(e["type"])).join(", ")}): the upstream sees the whole history`,
    );
  if (Array.isArray(request["mcp_servers"]) && request["mcp_servers"].length)
    warnings.push("mcp_servers: dropped: a chat-completions upstream cannot call remote MCP servers");
  if (request["container"] != null)
    warnings.push("container: dropped: a chat-completions upstream has no code-execution container");
}

/**
 * The chat-completions request for an Anthropic Messages request (model name as requested); what it dropped is
 * added to `warnings`.
 */
export function toChatRequest(request: MessagesRequest, warnings: string[] = []): Json {
  const messages: Json[] = [];
  const system = systemMessage(request["system"]);
  if (system) messages.push(system);
  request.messages.forEach((message, i) => {
    if (message["role"] === "user") messages.push(...userMessages(message, i, warnings));
    else if (message["role"] === "system") {
      const system = systemMessage(message["content"], `messages.${i}.content`);
      if (system) messages.push(system);
    } else messages.push(assistantMessage(message, i, warnings));
  });
  const chat: Json = { model: request.model, messages };
  if (typeof request.max_tokens === "number") chat["max_tokens"] = request.max_tokens;
  if (request.stream === true) {
    chat["stream"] = true;
    chat["stream_options"] = { include_usage: true };
  }
  const tools = chatTools(request["tools"], warnings);
  if (tools?.length) chat["tools"] = tools;
  chatToolChoice(request["tool_choice"], chat);
  const stop = request["stop_sequences"];
  if (Array.isArray(stop) && stop.length) chat["stop"] = stop;
  for (const key of ["temperature", "top_p", "top_k"]) if (typeof request[key] === "number") chat[key] = request[key];
  ignoredServerFeatures(request, warnings);
  const thinking = request["thinking"];
  if (isObject(thinking)) chat["chat_template_kwargs"] = { enable_thinking: thinking["type"] !== "disabled" };
  return chat;
}
