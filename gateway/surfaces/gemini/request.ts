// A Gemini generateContent request, checked and translated to the chat completion the upstream runs:
//   systemInstruction (a Content, or a string)    → a system message
//   user contents: text / inlineData image parts  → content parts (images as data: URLs; the upstream decides)
//                  functionResponse parts         → tool messages (the response object as JSON), before the rest
//   model contents: text / thought parts / functionCall → content / reasoning (both names) / tool_calls of one
//                  assistant message; a thoughtSignature rlgate wrote gives the reasoning back when the client
//                  dropped the thought parts (Gemini CLI does)
//   tools[].functionDeclarations (parameters or parametersJsonSchema), toolConfig.functionCallingConfig
//   generationConfig: temperature, topP, topK, maxOutputTokens, stopSequences, candidateCount, seed, penalties,
//                  responseMimeType / responseJsonSchema / responseSchema, thinkingConfig (thinkingBudget 0 →
//                  enable_thinking false)
// What the upstream cannot take is dropped with a warning recorded on the call (Google's server tools, safety
// settings, non-image media, speech and image output settings); what cannot be carried at all (cachedContent, a
// reference to state on Google's servers) or is malformed is refused with a 400 that names it.
import { setReasoning } from "../../../tokenizer/reasoning-field.ts";
import { GatewayError } from "../../errors.ts";
import { reasoningOfSignature } from "../../translate/carried-reasoning.ts";
import { contentOf } from "../../translate/chat-content.ts";
import { isObject, shown, textField, type Json } from "../../upstream/fields.ts";
import { jsonSchemaOf } from "./schema.ts";

export interface GeminiRequest extends Json {
  contents: Json[];
}

function invalid(param: string, message: string): GatewayError {
  return new GatewayError("RLGATE_BAD_REQUEST", `Invalid value at '${param}': ${message}`, { param });
}

export function parseGeminiRequest(body: unknown): GeminiRequest {
  if (!isObject(body)) throw new GatewayError("RLGATE_BAD_REQUEST", "request body must be a JSON object");
  const contents = body["contents"];
  if (!Array.isArray(contents) || contents.length === 0)
    throw invalid("contents", "contents is required (a non-empty array of Content)");
  contents.forEach((content, i) => {
    if (!isObject(content)) throw invalid(`contents[${i}]`, "each content must be an object");
    const role = content["role"];
    if (role !== undefined && role !== "user" && role !== "model" && role !== "function")
      throw invalid(`contents[${i}].role`, `expected 'user' or 'model', got ${shown(role)}`);
    const parts = content["parts"];
    if (!Array.isArray(parts) || !parts.every(isObject))
      throw invalid(`contents[${i}].parts`, "expected an array of Part objects");
  });
  for (const key of ["generationConfig", "toolConfig"]) {
    if (body[key] !== undefined && body[key] !== null && !isObject(body[key])) throw invalid(key, "expected an object");
  }
  if (body["tools"] !== undefined && body["tools"] !== null && !Array.isArray(body["tools"]))
    throw invalid("tools", "expected an array of Tool objects");
  if (body["cachedContent"] != null)
    throw invalid(
      "cachedContent",
      "cached contents live on Google's servers; rlgate forwards to a chat-completions upstream and cannot resolve them (send the contents themselves)",
    );
  return body as GeminiRequest;
}

/** An id made from a part's place (`contents[3].parts[1]` → `call_3_1`): the same on every request of a session. */
function positional(where: string): string {
  return `call_${(where.match(/\d+/g) ?? []).join("_")}`;
}

/** Tool-call ids for function calls and responses that carry none (Gemini's `id` is optional). */
class CallIds {
  readonly #pending: { name: string; id: string }[] = [];

  called(name: string, id: unknown, where: string): string {
    const given = typeof id === "string" && id ? id : positional(where);
    this.#pending.push({ name, id: given });
    return given;
  }

  /** A response's id: its own, else that of the earliest unanswered call of its name. */
  answered(name: string, id: unknown, where: string): string {
    if (typeof id === "string" && id) {
      const at = this.#pending.findIndex((call) => call.id === id);
      if (at >= 0) this.#pending.splice(at, 1);
      return id;
    }
    const at = this.#pending.findIndex((call) => call.name === name);
    if (at < 0) return positional(where);
    return this.#pending.splice(at, 1)[0]!.id;
  }
}

function mediaPart(part: Json, where: string, warnings: string[]): Json | null {
  const inline = part["inlineData"];
  if (isObject(inline)) {
    const mime = textField(inline["mimeType"], `${where}.inlineData.mimeType`);
    if (mime.startsWith("image/") && typeof inline["data"] === "string")
      return { type: "image_url", image_url: { url: `data:${mime};base64,${inline["data"]}` } };
    warnings.push(
      `${where}: inlineData of type '${shown(mime)}' dropped: a chat-completions upstream takes images only`,
    );
    return null;
  }
  const file = isObject(part["fileData"]) ? part["fileData"] : {};
  const uri = textField(file["fileUri"], `${where}.fileData.fileUri`);
  if (String(file["mimeType"] ?? "").startsWith("image/") && /^https?:\/\//.test(uri))
    return { type: "image_url", image_url: { url: uri } };
  warnings.push(`${where}: fileData '${shown(uri)}' dropped: only http(s) images reach a chat-completions upstream`);
  return null;
}

/** Parts that only Google's servers produce or read (code execution, tool calls of its own tools). */
const SERVER_PARTS = ["executableCode", "codeExecutionResult", "toolCall", "toolResponse"];

function functionResponseContent(response: Json, where: string, warnings: string[]): string {
  if (Array.isArray(response["parts"]) && response["parts"].length)
    warnings.push(
      `${where}.functionResponse.parts: media inside a function response dropped (tool messages carry text)`,
    );
  const value = response["response"];
  return JSON.stringify(value === undefined ? {} : value);
}

function userMessages(content: Json, i: number, ids: CallIds, warnings: string[]): Json[] {
  const out: Json[] = [];
  const parts: Json[] = [];
  (content["parts"] as Json[]).forEach((part, k) => {
    const where = `contents[${i}].parts[${k}]`;
    if (isObject(part["functionResponse"])) {
      const response = part["functionResponse"];
      const name = textField(response["name"], `${where}.functionResponse.name`);
      out.push({
        role: "tool",
        tool_call_id: ids.answered(name, response["id"], where),
        content: functionResponseContent(response, where, warnings),
      });
    } else if (typeof part["text"] === "string") parts.push({ type: "text", text: part["text"] });
    else if (part["inlineData"] !== undefined || part["fileData"] !== undefined) {
      const media = mediaPart(part, where, warnings);
      if (media) parts.push(media);
    } else if (part["functionCall"] !== undefined) throw invalid(where, "a functionCall part belongs to a model turn");
    else unknownPart(part, where, warnings);
  });
  if (parts.length) out.push({ role: "user", content: contentOf(parts) });
  return out;
}

function unknownPart(part: Json, where: string, warnings: string[]): void {
  const kind = SERVER_PARTS.find((key) => part[key] !== undefined);
  if (kind) {
    warnings.push(`${where}: '${kind}' part dropped: a chat-completions upstream cannot be shown it`);
    return;
  }
  // A part with a signature only (Gemini 3 sends one after a streamed answer) says nothing the model sees.
  if (part["thoughtSignature"] !== undefined && part["text"] === undefined) return;
  throw invalid(where, "a Part needs one of text, inlineData, fileData, functionCall, functionResponse");
}

function modelMessage(content: Json, i: number, ids: CallIds, warnings: string[]): Json {
  let text = "";
  let thoughts: string | null = null;
  let signed: string | null = null;
  const toolCalls: Json[] = [];
  (content["parts"] as Json[]).forEach((part, k) => {
    const where = `contents[${i}].parts[${k}]`;
    signed ??= reasoningOfSignature(part["thoughtSignature"]);
    if (isObject(part["functionCall"])) {
      const call = part["functionCall"];
      const name = textField(call["name"], `${where}.functionCall.name`);
      const args = call["args"] ?? {};
      if (!isObject(args)) throw invalid(`${where}.functionCall.args`, "expected an object");
      toolCalls.push({
        id: ids.called(name, call["id"], where),
        type: "function",
        function: { name, arguments: JSON.stringify(args) },
      });
    } else if (typeof part["text"] === "string") {
      if (part["thought"] === true) thoughts = (thoughts ?? "") + part["text"];
      else text += part["text"];
    } else if (part["functionResponse"] !== undefined)
      throw invalid(where, "a functionResponse part belongs to a user turn");
    else if (part["inlineData"] !== undefined || part["fileData"] !== undefined)
      warnings.push(`${where}: media in a model turn dropped: a chat-completions upstream's model never made it`);
    else unknownPart(part, where, warnings);
  });
  const out: Json = { role: "assistant", content: text };
  const reasoning = thoughts ?? signed;
  if (reasoning !== null) setReasoning(out, reasoning);
  if (toolCalls.length) out["tool_calls"] = toolCalls;
  return out;
}

function systemMessage(instruction: unknown): Json | null {
  if (instruction === undefined || instruction === null) return null;
  if (typeof instruction === "string") return instruction ? { role: "system", content: instruction } : null;
  if (!isObject(instruction) || !Array.isArray(instruction["parts"]))
    throw invalid("systemInstruction", "expected a Content with text parts");
  const parts = instruction["parts"].map((part, k) => {
    if (!isObject(part) || typeof part["text"] !== "string")
      throw invalid(`systemInstruction.parts[${k}]`, "system instructions take text parts");
    return { type: "text", text: part["text"] };
  });
  return parts.length ? { role: "system", content: contentOf(parts) } : null;
}

function chatTools(tools: unknown, warnings: string[]): Json[] {
  const out: Json[] = [];
  if (!Array.isArray(tools)) return out;
  tools.forEach((tool, k) => {
    if (!isObject(tool)) throw invalid(`tools[${k}]`, "expected a Tool object");
    for (const key of Object.keys(tool)) {
      if (key !== "functionDeclarations")
        warnings.push(`tools[${k}].${key}: dropped: a chat-completions upstream cannot run Google's own tools`);
    }
    const declarations = tool["functionDeclarations"];
    if (declarations === undefined) return;
    if (!Array.isArray(declarations)) throw invalid(`tools[${k}].functionDeclarations`, "expected an array");
    declarations.forEach((declaration, d) => {
      const where = `tools[${k}].functionDeclarations[${d}]`;
      if (!isObject(declaration) || typeof declaration["name"] !== "string" || !declaration["name"])
        throw invalid(`${where}.name`, "each function declaration needs a name");
      const parameters =
        declaration["parametersJsonSchema"] ??
        (declaration["parameters"] === undefined ? undefined : jsonSchemaOf(declaration["parameters"]));
      const fn: Json = { name: declaration["name"], parameters: parameters ?? { type: "object", properties: {} } };
      if (typeof declaration["description"] === "string") fn["description"] = declaration["description"];
      out.push({ type: "function", function: fn });
    });
  });
  return out;
}

function chatToolChoice(config: unknown, out: Json, warnings: string[]): void {
  const calling = isObject(config) ? config["functionCallingConfig"] : undefined;
  if (!isObject(calling)) return;
  const allowed = Array.isArray(calling["allowedFunctionNames"]) ? calling["allowedFunctionNames"] : [];
  switch (calling["mode"] ?? "AUTO") {
    case "AUTO":
    case "MODE_UNSPECIFIED":
    case "VALIDATED":
      out["tool_choice"] = "auto";
      break;
    case "NONE":
      out["tool_choice"] = "none";
      break;
    case "ANY":
      if (allowed.length === 1 && typeof allowed[0] === "string") {
        out["tool_choice"] = { type: "function", function: { name: allowed[0] } };
        return;
      }
      out["tool_choice"] = "required";
      break;
    default:
      throw invalid(
        "toolConfig.functionCallingConfig.mode",
        `expected AUTO, ANY, NONE or VALIDATED, got ${shown(calling["mode"])}`,
      );
  }
  if (allowed.length)
    warnings.push(
      "toolConfig.functionCallingConfig.allowedFunctionNames: not enforced: a chat-completions upstream restricts to one named function or none",
    );
}

/** generationConfig fields with a chat-completions counterpart of another name. */
const SAMPLING: Record<string, string> = {
  temperature: "temperature",
  topP: "top_p",
  topK: "top_k",
  seed: "seed",
  presencePenalty: "presence_penalty",
  frequencyPenalty: "frequency_penalty",
  maxOutputTokens: "max_tokens",
  candidateCount: "n",
};

/** generationConfig fields that change nothing a chat-completions upstream can do: said so, not applied. */
const UNSUPPORTED_CONFIG = [
  "responseModalities",
  "speechConfig",
  "imageConfig",
  "mediaResolution",
  "responseLogprobs",
  "logprobs",
  "enableEnhancedCivicAnswers",
  "routingConfig",
];

function applyGenerationConfig(config: Json, chat: Json, warnings: string[]): void {
  for (const [from, to] of Object.entries(SAMPLING)) {
    const value = config[from];
    if (value === undefined || value === null) continue;
    if (typeof value !== "number" || !Number.isFinite(value))
      throw invalid(`generationConfig.${from}`, "expected a number");
    chat[to] = value;
  }
  const stop = config["stopSequences"];
  if (Array.isArray(stop) && stop.length) {
    if (!stop.every((s) => typeof s === "string"))
      throw invalid("generationConfig.stopSequences", "expected an array of strings");
    chat["stop"] = stop;
  }
  // Gemini CLI writes its responseJsonSchema with Google's upper-case type names too (`"type": "OBJECT"`), which
  // Google accepts and a guided-decoding backend refuses: both are read as Google's schema.
  const schema = config["responseJsonSchema"] ?? config["responseSchema"];
  if (schema != null) {
    chat["response_format"] = { type: "json_schema", json_schema: { name: "response", schema: jsonSchemaOf(schema) } };
  } else if (config["responseMimeType"] === "application/json") chat["response_format"] = { type: "json_object" };
  for (const key of UNSUPPORTED_CONFIG) {
    if (config[key] != null) warnings.push(`generationConfig.${key}: not applied by a chat-completions upstream`);
  }
  const thinking = config["thinkingConfig"];
  if (isObject(thinking)) chat["chat_template_kwargs"] = { enable_thinking: thinking["thinkingBudget"] !== 0 };
}

/** Whether the client asked for thought parts (`thinkingConfig.includeThoughts`). */
export function includeThoughts(request: GeminiRequest): boolean {
  const config = request["generationConfig"];
  const thinking = isObject(config) ? config["thinkingConfig"] : undefined;
  return isObject(thinking) && thinking["includeThoughts"] === true;
}

/** How many candidates the client asked for (`generationConfig.candidateCount`, default 1). */
export function candidateCount(request: GeminiRequest): number {
  const config = request["generationConfig"];
  const n = isObject(config) ? config["candidateCount"] : undefined;
  return typeof n === "number" && Number.isInteger(n) && n > 1 ? n : 1;
}

/**
 * The chat-completions request for a Gemini request to `model` (as named in the path); what it dropped is added to
 * `warnings`.
 */
export function toChatRequest(request: GeminiRequest, model: string, stream: boolean, warnings: string[] = []): Json {
  const messages: Json[] = [];
  const system = systemMessage(request["systemInstruction"]);
  if (system) messages.push(system);
  const ids = new CallIds();
  request.contents.forEach((content, i) => {
    if (content["role"] === "model") messages.push(modelMessage(content, i, ids, warnings));
    else messages.push(...userMessages(content, i, ids, warnings));
  });
  const chat: Json = { model, messages };
  if (stream) {
    chat["stream"] = true;
    chat["stream_options"] = { include_usage: true };
  }
  const tools = chatTools(request["tools"], warnings);
  if (tools.length) chat["tools"] = tools;
  chatToolChoice(request["toolConfig"], chat, warnings);
  if (isObject(request["generationConfig"])) applyGenerationConfig(request["generationConfig"], chat, warnings);
  if (Array.isArray(request["safetySettings"]) && request["safetySettings"].length)
    warnings.push("safetySettings: not applied: a chat-completions upstream has no safety filters to set");
  return chat;
}
