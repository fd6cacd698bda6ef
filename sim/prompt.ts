// Prompt token ids, cached. Rendering a long history with the jinja template and tokenizing it are the sim's
// costliest steps, and agent rollouts resend the same history with one more turn each call, so:
// - whole prompts are cached by request (messages, tools, thinking switch);
// - tokenization is cached per `<|im_start|>` block. Added tokens are split out before BPE runs, so encoding the
//   blocks one by one gives exactly the ids of encoding the whole text.
import { renderChat, type ChatMessage } from "../tokenizer/chat-template.ts";
import { qwen3Tokenizer } from "../tokenizer/qwen3.ts";
import { LRUCache } from "lru-cache";

const IM_START = "<|im_start|>";
const promptCache = new LRUCache<string, ChatPrompt>({ max: 256 });
const blockCache = new LRUCache<string, number[]>({ max: 8192 });

export interface ChatPrompt {
  text: string;
  ids: number[];
}

export interface ChatPromptInput {
  messages: readonly ChatMessage[];
  tools?: unknown[] | null;
  enableThinking?: boolean;
  addGenerationPrompt?: boolean;
}

export function chatPrompt(input: ChatPromptInput): ChatPrompt {
  const addGenerationPrompt = input.addGenerationPrompt ?? true;
  const key = JSON.stringify([input.messages, input.tools ?? null, input.enableThinking ?? null, addGenerationPrompt]);
  let prompt = promptCache.get(key);
  if (!prompt) {
    const text = renderChat(input.messages, { tools: input.tools, enableThinking: input.enableThinking, addGenerationPrompt });
    prompt = { text, ids: encodeCached(text) };
    promptCache.set(key, prompt);
  }
  return prompt;
}

/** Tokenizes text block by block (split before each `<|im_start|>`), reusing blocks seen before. */
export function encodeCached(text: string): number[] {
  const tok = qwen3Tokenizer();
  const ids: number[] = [];
  let start = 0;
  while (start < text.length) {
    let end = text.indexOf(IM_START, start + 1);
    if (end < 0) end = text.length;
    const block = text.slice(start, end);
    let blockIds = blockCache.get(block);
    if (!blockIds) {
      blockIds = tok.encode(block);
      blockCache.set(block, blockIds);
    }
    for (const id of blockIds) ids.push(id);
    start = end;
  }
  return ids;
}
