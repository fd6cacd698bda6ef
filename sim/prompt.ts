// Prompt token ids, cached. Rendering a long history with the jinja template and tokenizing it are the sim's
// costliest steps, and agent rollouts resend the same history with one more turn each call, so:
// - whole prompts are cached by request (messages, tools, thinking switch);
// - tokenization is cached per `<|im_start|>` block (block-encoder.ts).
import { BlockEncoder } from "../tokenizer/block-encoder.ts";
import { renderChat, type ChatMessage } from "../tokenizer/chat-template.ts";
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
  /** The sim's chat template when it is not Qwen3's (`--chat-template`). */
  template?: string;
}

export function chatPrompt(input: ChatPromptInput): ChatPrompt {
  const addGenerationPrompt = input.addGenerationPrompt ?? true;
  const key = JSON.stringify([
    input.messages,
    input.tools ?? null,
    input.enableThinking ?? null,
    addGenerationPrompt,
    input.template ?? null,
  ]);
  let prompt = promptCache.get(key);
  if (!prompt) {
    const { messages, tools, enableThinking, template } = input;
    const text = renderChat(messages, { tools, enableThinking, addGenerationPrompt, template });
    prompt = { text, ids: encodeCached(text) };
    promptCache.set(key, prompt);
  }
  return prompt;
}

/** Tokenizes text block by block (split before each `<|im_start|>`), reusing blocks seen before. */
export function encodeCached(text: string): number[] {
  return blocks.encode(text);
}
