// Renders OpenAI-style chat messages with a model's chat template (the real Qwen3 one built in), normalizing them the way vLLM does first
// (content parts joined, tool-call arguments parsed to objects), so that prompts match production token for token.
import { Template } from "@huggingface/jinja";
import { pythonScalarArguments, pythonScalarTools, writesXmlToolCalls } from "./qwen3-coder.ts";
import { vllmTools } from "./vllm-tools.ts";
import { qwen3Tokenizer } from "./qwen3.ts";

export interface ChatToolCall {
  id?: string;
  type?: string;
  function: { name: string; arguments: string | Record<string, unknown> };
}

export interface ChatMessage {
  role: string;
  content?: string | null | Array<{ type: string; text?: string; [k: string]: unknown }>;
  reasoning_content?: string | null;
  tool_calls?: ChatToolCall[] | null;
  tool_call_id?: string;
  name?: string;
}

export interface RenderOptions {
  tools?: unknown[] | null;
  addGenerationPrompt?: boolean;
  /** Qwen3's `enable_thinking` (chat_template_kwargs); undefined leaves thinking on. */
  enableThinking?: boolean;
  /** A jinja chat template to render with instead of Qwen3's own (a server started with another template). */
  template?: string;
  /** The request's reasoning_effort: harmony (gpt-oss) writes it in the system message; the templates read none. */
  reasoningEffort?: string | null;
}

function contentText(content: ChatMessage["content"]): string {
  if (content == null) return "";
  if (typeof content === "string") return content;
  // vLLM's "string" content format joins text parts with newlines.
  return content
    .filter((part) => part.type === "text" || part.type === "input_text")
    .map((part) => part.text ?? "")
    .join("\n");
}

function normalizeToolCall(call: ChatToolCall): ChatToolCall {
  const args = call.function.arguments;
  if (typeof args !== "string") return call;
  try {
    // vLLM parses arguments so the template's `tojson` re-serializes them (this is one source of re-serialization).
    const parsed: unknown = JSON.parse(args);
    if (parsed && typeof parsed === "object" && !Array.isArray(parsed)) {
      return { ...call, function: { ...call.function, arguments: parsed as Record<string, unknown> } };
    }
  } catch {
    // Malformed arguments are rendered verbatim, as the template's `is string` branch does.
  }
  return call;
}

export function normalizeMessages(messages: readonly ChatMessage[]): ChatMessage[] {
  return messages.map((message) => {
    const out: ChatMessage = { ...message, content: contentText(message.content) };
    if (message.tool_calls?.length) out.tool_calls = message.tool_calls.map(normalizeToolCall);
    else delete out.tool_calls;
    if (message.reasoning_content == null) delete out.reasoning_content;
    return out;
  });
}

/** A model's jinja chat template with the special tokens it is rendered with. */
export class ChatTemplate {
  readonly #template: Template;
  readonly #bos: string;
  readonly #eos: string;
  /** An XML tool-call template (Qwen3-Coder): scalar parameters are printed as Python's jinja prints them. */
  readonly #xmlToolCalls: boolean;

  constructor(source: string, tokens: { bos: string; eos: string }) {
    this.#template = new Template(source);
    this.#bos = tokens.bos;
    this.#eos = tokens.eos;
    this.#xmlToolCalls = writesXmlToolCalls(source);
  }

  render(messages: readonly ChatMessage[], options: RenderOptions = {}): string {
    let normalized = normalizeMessages(messages);
    if (this.#xmlToolCalls) normalized = normalized.map(pythonScalarCalls);
    const context: Record<string, unknown> = {
      messages: normalized,
      add_generation_prompt: options.addGenerationPrompt ?? true,
      bos_token: this.#bos,
      eos_token: this.#eos,
    };
    if (options.tools?.length) {
      const tools = vllmTools(options.tools);
      context["tools"] = this.#xmlToolCalls ? pythonScalarTools(tools) : tools;
    }
    if (options.enableThinking !== undefined) context["enable_thinking"] = options.enableThinking;
    return this.#template.render(context);
  }
}

function pythonScalarCalls(message: ChatMessage): ChatMessage {
  if (!message.tool_calls) return message;
  return {
    ...message,
    tool_calls: message.tool_calls.map((call) =>
      typeof call.function.arguments === "string"
        ? call
        : { ...call, function: { ...call.function, arguments: pythonScalarArguments(call.function.arguments) } },
    ),
  };
}

/** Qwen3's template, and any other a server was started with (`rlgate sim --chat-template`), compiled once each. */
const templates = new Map<string, ChatTemplate>();

export function renderChat(messages: readonly ChatMessage[], options: RenderOptions = {}): string {
  const source = options.template ?? qwen3Tokenizer().chatTemplate;
  let template = templates.get(source);
  if (!template) templates.set(source, (template = new ChatTemplate(source, { bos: "", eos: "<|im_end|>" })));
  return template.render(messages, options);
}

export function renderChatIds(messages: readonly ChatMessage[], options: RenderOptions = {}): number[] {
  return qwen3Tokenizer().encode(renderChat(messages, options));
}
