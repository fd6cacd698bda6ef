// The chat format the sim serves: its tokenizer, template, turn markers and reasoning markup. `rlgate sim
// --tool-call-parser NAME` picks the family that answers in that syntax (hermes: Qwen3, qwen3_coder: Qwen3-Coder,
// llama3_json: Llama 3.x); loading a tokenizer takes ~1 s, so it happens on the first request that needs it.
import { familyOfParser } from "../tokenizer/families.ts";
import { builtInChatFormat, type ModelChatFormat } from "../tokenizer/model-format.ts";
import type { SimContext } from "./flavor.ts";

export function simFormat(ctx: Pick<SimContext, "toolParser">): ModelChatFormat {
  return builtInChatFormat(familyOfParser(ctx.toolParser ?? "hermes"));
}

/** Whether the served model writes a think block: a family with reasoning markup, in a template that writes it. */
export function simThinks(ctx: Pick<SimContext, "toolParser" | "chatTemplate">): boolean {
  if (simFormat(ctx).think === null) return false;
  // A template without think markup (Qwen3-Coder's) serves a model that does not think.
  return ctx.toolParser !== "qwen3_coder" || (ctx.chatTemplate ?? "").includes("<think>");
}
