// The chat format the sim serves: its tokenizer, template, turn markers and reasoning markup. `rlgate sim
// --tool-call-parser NAME` picks the family that answers in that syntax (hermes: Qwen3, qwen3_coder: Qwen3-Coder,
// llama3_json: Llama 3.x, deepseek_v31: DeepSeek V3.1); loading a tokenizer takes ~1 s, so it happens on the first request that needs it.
import { FAMILIES, familyOfParser } from "../tokenizer/families.ts";
import { GPTOSS_VOCAB_SIZE } from "../tokenizer/gptoss.ts";
import { builtInChatFormat, type ModelChatFormat } from "../tokenizer/model-format.ts";
import { VOCAB_SIZE } from "../tokenizer/token-text.ts";
import type { SimContext } from "./flavor.ts";

export function simFormat(ctx: Pick<SimContext, "toolParser">): ModelChatFormat {
  return builtInChatFormat(familyOfParser(ctx.toolParser ?? "hermes"));
}

/** Whether the served model writes a think block: a family with reasoning markup, in a template that writes it. */
export function simThinks(ctx: Pick<SimContext, "toolParser" | "chatTemplate">): boolean {
  // Without reasoning markup, a family vLLM serves with a reasoning parser reasons on a channel (harmony's analysis).
  const format = simFormat(ctx);
  if (format.think === null) return format.family.reasons;
  // Served without a reasoning split (DeepSeek V3.1 in its default, non-thinking mode): no think block.
  if (!format.family.reasons) return false;
  // A template without think markup (Qwen3-Coder's) serves a model that does not think.
  return ctx.toolParser !== "qwen3_coder" || (ctx.chatTemplate ?? "").includes("<think>");
}

/** The ids a prompt may hold: gpt-oss's vocabulary, or Qwen3's (which holds Llama 3's as well). */
export function simVocabSize(ctx: Pick<SimContext, "toolParser">): number {
  return simFormat(ctx).family === FAMILIES.gptoss ? GPTOSS_VOCAB_SIZE : VOCAB_SIZE;
}
