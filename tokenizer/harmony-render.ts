// gpt-oss prompts as vLLM renders them: not with a jinja template but by turning the chat request into harmony messages
// (vllm/entrypoints/openai/parser/harmony_utils.py: build_harmony_preamble, parse_chat_inputs_to_harmony_messages,
// auto_drop_analysis_messages) and rendering those with openai_harmony's renderer (src/encoding.rs):
// - a system message: model identity, knowledge cutoff, current date, `Reasoning: <effort>` (medium unless the request
//   says), the valid channels (commentary only when the request has tools), and the note that function calls go to
//   the commentary channel when a developer message declares functions;
// - a developer message when the request's first message is a system/developer one (`# Instructions`) or it has
//   tools (`# Tools` … `namespace functions { … }`); a later system/developer message is another developer message;
// - an assistant message with tool calls: its content on the commentary channel, its reasoning on analysis, then
//   each call `to=functions.NAME` on commentary with content type `json`, ended by `<|call|>`; other assistant
//   messages: reasoning on analysis, content on final; a tool result `functions.NAME to=assistant` on commentary;
// - analysis messages before the last final answer are dropped.
import type { ChatMessage, ChatToolCall } from "./chat-template.ts";
import { toolDeclaration } from "./harmony-schema.ts";

export const HARMONY_TOKENS = {
  start: "<|start|>",
  end: "<|end|>",
  message: "<|message|>",
  channel: "<|channel|>",
  constrain: "<|constrain|>",
  call: "<|call|>",
  return: "<|return|>",
} as const;

const IDENTITY = "You are ChatGPT, a large language model trained by OpenAI.";
const KNOWLEDGE_CUTOFF = "2024-06";

export interface HarmonyRenderOptions {
  tools?: readonly unknown[] | null;
  addGenerationPrompt?: boolean;
  /** The request's reasoning_effort ("low", "medium", "high"); absent: harmony's default, medium. */
  reasoningEffort?: string | null;
  /** `Current date:` (vLLM writes the server's date at each request); default today's. */
  date?: string;
}

/** A harmony message before rendering. */
interface HarmonyMessage {
  /** The role, or a tool's name (`functions.NAME`) for a tool's answer. */
  author: string;
  role: string;
  recipient?: string;
  channel?: string;
  contentType?: string;
  text: string;
}

/** Thrown for a request vLLM refuses to render for gpt-oss (a 400 there). */
export class HarmonyRenderError extends Error {
  readonly code = "RLGATE_HARMONY_RENDER";
}

// flatten_input_text_content: the text of every part that has one, joined with nothing.
function flatten(content: ChatMessage["content"]): string | null {
  if (content == null || typeof content === "string") return content ?? null;
  if (!Array.isArray(content)) return null;
  const texts = content
    .map((part) => (typeof part === "string" ? part : part?.text))
    .filter((t) => typeof t === "string");
  return texts.length > 0 ? texts.join("") : null;
}

function reasoningOf(message: ChatMessage): string | null {
  // vLLM reads `reasoning`; a harness that echoes what the 0.10 API answered sends `reasoning_content`.
  const value = (message as { reasoning?: unknown }).reasoning ?? message.reasoning_content;
  return typeof value === "string" && value ? value : null;
}

function argumentsText(call: ChatToolCall): string {
  const args = call.function.arguments;
  return typeof args === "string" ? args : JSON.stringify(args);
}

function systemText(effort: string, date: string, withCustomTools: boolean, hasFunctions: boolean): string {
  const channels = withCustomTools ? "analysis, commentary, final" : "analysis, final";
  let header = `# Valid channels: ${channels}. Channel must be included for every message.`;
  if (hasFunctions) header += "\nCalls to these tools must go to the commentary channel: 'functions'.";
  return [
    `${IDENTITY}\nKnowledge cutoff: ${KNOWLEDGE_CUTOFF}\nCurrent date: ${date}`,
    `Reasoning: ${effort}`,
    header,
  ].join("\n\n");
}

interface FunctionTool {
  name: string;
  description: string;
  parameters: unknown;
}

function functionTools(tools: readonly unknown[] | null | undefined): FunctionTool[] {
  const out: FunctionTool[] = [];
  for (const tool of tools ?? []) {
    if (!tool || typeof tool !== "object") continue;
    const t = tool as Record<string, unknown>;
    if (t["type"] !== undefined && t["type"] !== "function") continue;
    const fn = (t["function"] ?? {}) as Record<string, unknown>;
    out.push({
      name: String(fn["name"] ?? ""),
      description: typeof fn["description"] === "string" ? fn["description"] : "",
      parameters: fn["parameters"] ?? null,
    });
  }
  return out;
}

function developerText(instructions: string | null, tools: FunctionTool[]): string {
  const sections: string[] = [];
  if (instructions !== null) sections.push("# Instructions", instructions);
  if (tools.length > 0) {
    const body = ["## functions\n", "namespace functions {\n"];
    for (const tool of tools) body.push(toolDeclaration(tool.name, tool.description, tool.parameters));
    body.push("} // namespace functions");
    sections.push(["# Tools", body.join("\n")].join("\n\n"));
  }
  return sections.join("\n\n");
}

function developer(text: string): HarmonyMessage {
  return { author: "developer", role: "developer", text };
}

function chatToHarmony(message: ChatMessage, toolNames: Map<string, string>): HarmonyMessage[] {
  const role = message.role;
  const out: HarmonyMessage[] = [];
  const assistant = (channel: string, text: string, extra: Partial<HarmonyMessage> = {}): HarmonyMessage => ({
    author: "assistant",
    role: "assistant",
    channel,
    text,
    ...extra,
  });
  if (role === "assistant" && message.tool_calls?.length) {
    const content = flatten(message.content);
    if (content) out.push(assistant("commentary", content));
    const reasoning = reasoningOf(message);
    if (reasoning) out.push(assistant("analysis", reasoning));
    for (const call of message.tool_calls) {
      out.push(
        assistant("commentary", argumentsText(call) || "", {
          recipient: `functions.${call.function.name ?? ""}`,
          contentType: "json",
        }),
      );
    }
    return out;
  }
  if (role === "tool") {
    const name = toolNames.get(message.tool_call_id ?? "") ?? "";
    const author = `functions.${name}`;
    return [
      { author, role: "tool", channel: "commentary", recipient: "assistant", text: flatten(message.content) ?? "" },
    ];
  }
  const reasoning = role === "assistant" ? reasoningOf(message) : null;
  if (reasoning) out.push(assistant("analysis", reasoning));
  const text = flatten(message.content) ?? "";
  if (role === "assistant") {
    if (text) out.push(assistant("final", text));
  } else if (role === "system" || role === "developer") {
    const instructions = flatten(message.content);
    if (instructions !== null) out.push(developer(`# Instructions\n\n${instructions}`));
  } else {
    out.push({ author: role, role, text });
  }
  return out;
}

function dropAnalysisBeforeLastFinal(messages: HarmonyMessage[]): HarmonyMessage[] {
  let last = -1;
  for (let i = messages.length - 1; i >= 0; i--) {
    if (messages[i]!.role === "assistant" && messages[i]!.channel === "final") {
      last = i;
      break;
    }
  }
  return messages.filter((m, i) => !(i < last && m.channel === "analysis"));
}

function renderMessage(m: HarmonyMessage): string {
  let out = HARMONY_TOKENS.start + m.author;
  if (m.recipient !== undefined && m.recipient !== "all") out += ` to=${m.recipient}`;
  if (m.channel !== undefined) out += HARMONY_TOKENS.channel + m.channel;
  if (m.contentType !== undefined) {
    out += m.contentType.startsWith(HARMONY_TOKENS.constrain)
      ? ` ${HARMONY_TOKENS.constrain}${m.contentType.slice(HARMONY_TOKENS.constrain.length)}`
      : ` ${m.contentType}`;
  }
  out += HARMONY_TOKENS.message + m.text;
  return out + (m.role === "assistant" && m.recipient !== undefined ? HARMONY_TOKENS.call : HARMONY_TOKENS.end);
}

function today(): string {
  return new Date().toISOString().slice(0, 10);
}

/** A chat request's messages as the gpt-oss prompt vLLM renders for it (text; its special tokens written out). */
export function renderHarmony(messages: readonly ChatMessage[], options: HarmonyRenderOptions = {}): string {
  const effort = options.reasoningEffort ?? "medium";
  if (!["low", "medium", "high"].includes(effort))
    throw new HarmonyRenderError(`Harmony does not support reasoning_effort='${effort}'`);
  const withCustomTools = options.tools != null;
  const tools = functionTools(options.tools);
  let rest = [...messages];
  let instructions: string | null = null;
  if (rest[0] && (rest[0].role === "system" || rest[0].role === "developer")) {
    instructions = flatten(rest[0].content);
    rest = rest.slice(1);
  }
  const toolNames = new Map<string, string>();
  for (const message of rest)
    for (const call of message.tool_calls ?? []) toolNames.set(call.id ?? "", call.function.name);
  const conversation = dropAnalysisBeforeLastFinal(rest.flatMap((m) => chatToHarmony(m, toolNames)));
  const system: HarmonyMessage = {
    author: "system",
    role: "system",
    text: systemText(effort, options.date ?? today(), withCustomTools, tools.length > 0),
  };
  const head = [system];
  if (instructions || tools.length > 0) head.push(developer(developerText(instructions, tools)));
  const text = [...head, ...conversation].map(renderMessage).join("");
  return options.addGenerationPrompt === false ? text : `${text}${HARMONY_TOKENS.start}assistant`;
}
