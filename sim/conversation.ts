// What a policy needs to know about a request, read either from chat messages or from a prompt that is already a
// rendered chat of the served family (a /v1/completions call). Policies never see the wire format.
import type { ChatMessage } from "../tokenizer/chat-template.ts";
import { FAMILIES, type FamilyMarkup } from "../tokenizer/families.ts";
import { jsonObjectEnd } from "../tokenizer/llama3-json.ts";
import { ConversationReader, type ConversationView, type ToolChoice, type ToolSpec } from "./conversation-view.ts";
import { viewFromDeepSeekPrompt } from "./deepseek-view.ts";
import { viewFromHarmonyPrompt } from "./harmony-view.ts";

function text(content: ChatMessage["content"]): string {
  if (content == null) return "";
  if (typeof content === "string") return content;
  return content.map((part) => (typeof part.text === "string" ? part.text : "")).join("\n");
}

export function toolSpecs(tools: unknown): ToolSpec[] {
  if (!Array.isArray(tools)) return [];
  const specs: ToolSpec[] = [];
  for (const tool of tools) {
    if (!tool || typeof tool !== "object") continue;
    const t = tool as Record<string, unknown>;
    const fn = (t["function"] && typeof t["function"] === "object" ? t["function"] : t) as Record<string, unknown>;
    if (typeof fn["name"] === "string") specs.push({ name: fn["name"], parameters: fn["parameters"] });
  }
  return specs;
}

export function toolChoiceOf(value: unknown): ToolChoice {
  if (value === "none" || value === "required" || value === "auto") return value;
  if (value && typeof value === "object") {
    const fn = (value as Record<string, unknown>)["function"];
    if (fn && typeof fn === "object" && typeof (fn as Record<string, unknown>)["name"] === "string") {
      return { name: (fn as Record<string, string>)["name"]! };
    }
  }
  return "auto";
}

export function viewFromChat(
  messages: readonly ChatMessage[],
  tools: unknown,
  toolChoice: unknown,
  enableThinking: boolean | undefined,
): ConversationView {
  const reader = new ConversationReader(enableThinking !== false);
  for (const message of messages) {
    if (message.role === "assistant") reader.assistant();
    else if (message.role === "tool") reader.toolResult(text(message.content));
    else if (message.role === "user") reader.user(text(message.content));
  }
  reader.view.tools = toolSpecs(tools);
  reader.view.toolChoice = toolChoiceOf(toolChoice);
  return reader.view;
}

const XML_FUNCTION = /<function>\n<name>([^<]*)<\/name>([\s\S]*?)\n<\/function>/g;
const XML_PARAMETER = /<parameter>\n<name>([^<]*)<\/name>(?:\n<type>([^<]*)<\/type>)?/g;
const XML_REQUIRED = /\n<required>(\[[^\n]*\])<\/required>/;

/** Tool signatures as Qwen3-Coder's template writes them (`<function>\n<name>…</name>…<parameters>…`). */
function xmlToolSpecs(block: string): ToolSpec[] {
  return [...block.matchAll(XML_FUNCTION)].map(([, name, body]) => {
    const properties: Record<string, unknown> = {};
    for (const [, param, type] of body!.matchAll(XML_PARAMETER)) properties[param!] = type ? { type } : {};
    let required: unknown = [];
    try {
      required = JSON.parse(XML_REQUIRED.exec(body!)?.[1] ?? "[]");
    } catch {
      // Not JSON: no required parameters known.
    }
    return { name: name!, parameters: { type: "object", properties, required } };
  });
}

const TOOL_RESPONSE = /<tool_response>\n([\s\S]*?)\n<\/tool_response>/g;
// What Llama 3's template writes before the tool signatures it puts in the first user turn.
const LLAMA_TOOLS_PREAMBLE = "Do not use variables.\n\n";

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** A family's turns as a pattern: role, then the turn's text up to its end (or the end of the prompt). */
function blockPattern(markup: FamilyMarkup): RegExp {
  const [open, close] = markup.header("\u0000").split("\u0000") as [string, string];
  return new RegExp(
    `${escapeRegExp(open)}(\\w+)${escapeRegExp(close)}([\\s\\S]*?)(?:${escapeRegExp(markup.turnEnd)}|$)`,
    "g",
  );
}

/** Llama 3's first user turn with tools: the preamble, the signatures as indented JSON, then the user's own text. */
function llamaToolTurn(body: string): { tools: ToolSpec[]; text: string } | null {
  const at = body.indexOf(LLAMA_TOOLS_PREAMBLE);
  if (!body.startsWith("Given the following functions") || at < 0) return null;
  let pos = at + LLAMA_TOOLS_PREAMBLE.length;
  const parsed: unknown[] = [];
  while (body[pos] === "{") {
    const end = jsonObjectEnd(body, pos);
    if (end < 0) break;
    parsed.push(JSON.parse(body.slice(pos, end)));
    pos = end + 2;
  }
  return { tools: toolSpecs(parsed), text: body.slice(pos) };
}

/** A tool result as Llama 3's template writes it (`tojson` of the content string). */
function llamaToolResult(body: string): string {
  try {
    const value: unknown = JSON.parse(body);
    return typeof value === "string" ? value : body;
  } catch {
    return body;
  }
}

/**
 * Reads a prompt rendered with the served family's chat template (Qwen3's ChatML by default) back into a view; any
 * other text is a plain continuation.
 */
export function viewFromPromptText(prompt: string, markup: FamilyMarkup = FAMILIES.qwen3.markup): ConversationView {
  const plain: ConversationView = {
    assistantTurns: 0,
    tools: [],
    toolChoice: "auto",
    toolResults: [],
    allToolResults: 0,
    lastToolResult: undefined,
    lastUserText: prompt,
    openingUserText: prompt,
    thinking: false,
    chatShaped: false,
  };
  if (markup === FAMILIES.gptoss.markup) return viewFromHarmonyPrompt(prompt) ?? plain;
  if (markup === FAMILIES.deepseekV31.markup) return viewFromDeepSeekPrompt(prompt) ?? plain;
  const generation = markup.header("assistant");
  const noThink = markup.think?.empty ?? null;
  const at = prompt.endsWith(generation)
    ? prompt.length - generation.length
    : noThink !== null && prompt.endsWith(generation + noThink)
      ? prompt.length - generation.length - noThink.length
      : -1;
  if (at < 0) return plain;
  const reader = new ConversationReader(markup.think !== null && !(noThink !== null && prompt.endsWith(noThink)));
  const view = reader.view;
  const tools = /<tools>\n([\s\S]*?)\n<\/tools>/.exec(prompt);
  if (tools) {
    const parsed: unknown[] = [];
    for (const line of tools[1]!.split("\n")) {
      try {
        parsed.push(JSON.parse(line));
      } catch {
        // A line that is not JSON is not a tool signature.
      }
    }
    view.tools = parsed.length > 0 ? toolSpecs(parsed) : xmlToolSpecs(tools[1]!);
  }
  for (const [, role, whole] of prompt.slice(0, at).matchAll(blockPattern(markup))) {
    let body = whole!;
    if (role === "assistant") reader.assistant();
    if (role === "ipython") {
      reader.toolResult(llamaToolResult(body));
      continue;
    }
    if (role !== "user") continue;
    const llamaTools = view.assistantTurns === 0 ? llamaToolTurn(body) : null;
    if (llamaTools) {
      view.tools = llamaTools.tools;
      body = llamaTools.text;
    }
    const responses = [...body.matchAll(TOOL_RESPONSE)].map((m) => m[1]!);
    if (responses.length > 0 && body.trimStart().startsWith("<tool_response>")) {
      for (const response of responses) reader.toolResult(response);
    } else reader.user(body);
  }
  return view;
}
