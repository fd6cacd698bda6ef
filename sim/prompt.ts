// Prompt token ids, cached. Rendering a long history with the jinja template and tokenizing it are the sim's
// costliest steps, and agent rollouts resend the same history with one more turn each call, so:
// - whole prompts are cached by request (messages, tools, thinking switch);
// - tokenization is cached per turn (block-encoder.ts; the served format's own encoder splits before its turn marker).
import { BlockEncoder } from "../tokenizer/block-encoder.ts";
import { renderChat, type ChatMessage } from "../tokenizer/chat-template.ts";
import type { ModelChatFormat } from "../tokenizer/model-format.ts";
import { qwen3Tokenizer } from "../tokenizer/qwen3.ts";
import { LRUCache } from "lru-cache";

const promptCache = new LRUCache<string, ChatPrompt>({ max: 256 });
const blocks = new BlockEncoder((text) => qwen3Tokenizer().encode(text), "<|im_start|>");

export interface ChatPrompt {
  text: string;
  ids: number[];
}

export interface ChatPromptInput {
  messages: readonly ChatMessage[];
  tools?: unknown[] | null;
  enableThinking?: boolean;
  addGenerationPrompt?: boolean;
  /** The sim's chat template when it is not Qwen3's (`--chat-template`, rendered for Qwen3's tokenizer). */
  template?: string;
  /** The served chat format (template and tokenizer) when no template is given; undefined: Qwen3's. */
  format?: ModelChatFormat;
  /** The request's reasoning_effort (harmony writes it in the system message). */
  reasoningEffort?: string | null;
}

export function chatPrompt(input: ChatPromptInput): ChatPrompt {
  const addGenerationPrompt = input.addGenerationPrompt ?? true;
  const key = JSON.stringify([
    input.messages,
    input.tools ?? null,
    input.enableThinking ?? null,
    addGenerationPrompt,
    input.template ?? null,
    input.template ? null : (input.format?.source ?? null),
    input.reasoningEffort ?? null,
  ]);
  let prompt = promptCache.get(key);
  if (!prompt) {
    const { messages, tools, enableThinking, template, reasoningEffort } = input;
    const format = template ? undefined : input.format;
    const text = format
      ? format.render(messages, { tools, enableThinking, addGenerationPrompt, reasoningEffort })
      : renderChat(messages, { tools, enableThinking, addGenerationPrompt, template });
    prompt = { text, ids: encodeCached(text, format) };
    promptCache.set(key, prompt);
  }
  return prompt;
}

/** Tokenizes text block by block (split before each turn marker), reusing blocks seen before; Qwen3's by default. */
export function encodeCached(text: string, format?: ModelChatFormat): number[] {
  return format ? format.encode(text) : blocks.encode(text);
}
