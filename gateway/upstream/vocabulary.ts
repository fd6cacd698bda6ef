// How many token ids the served model has, to check the ids an upstream reports against. vLLM's /v1/models carries
// no vocabulary size, so it comes from --vocab-size, or from the model's family where rlgate knows its tokenizer
// (Qwen3, Llama 3, DeepSeek V3.x, gpt-oss), or else is the bound every stored id must meet anyway: an int32.
import { DEEPSEEK_V31_VOCAB_SIZE } from "../../tokenizer/deepseek-v31.ts";
import { GPTOSS_VOCAB_SIZE } from "../../tokenizer/gptoss.ts";
import { LLAMA3_VOCAB_SIZE } from "../../tokenizer/llama3.ts";
import { QWEN3_VOCAB_SIZE } from "../../tokenizer/qwen3.ts";

/** Ids are stored as int32: an id at or above this cannot be kept as it was sent. */
export const INT32_IDS = 2 ** 31;

const KNOWN: Array<[RegExp, number]> = [
  [/qwen3/i, QWEN3_VOCAB_SIZE],
  [/llama-?3/i, LLAMA3_VOCAB_SIZE],
  // V3 and V3.1 (and R1) share the embedding's 129,280 rows.
  [/deepseek-?(v3|r1)/i, DEEPSEEK_V31_VOCAB_SIZE],
  // gpt-oss-20b and -120b: 201,088 rows.
  [/gpt-oss/i, GPTOSS_VOCAB_SIZE],
];

/** The number of token ids of `model` (ids run from 0 to this minus one). */
export function vocabularySize(model: unknown, configured: number | null): number {
  if (configured !== null) return configured;
  if (typeof model === "string") for (const [pattern, size] of KNOWN) if (pattern.test(model)) return size;
  return INT32_IDS;
}
