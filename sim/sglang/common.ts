// Pieces of SGLang's response shapes shared by its routes.
import type { Generation } from "../generate.ts";

/** SGLang's `matched_stop`: the stop string or stop token id that ended the turn (the EOS id included). */
export function matchedStop(gen: Generation): number | string | null {
  if (gen.finishReason !== "stop") return null;
  return gen.stopReason ?? gen.ids.at(-1) ?? null;
}

export function sglangUsage(prompt: number, completion: number) {
  return {
    prompt_tokens: prompt,
    total_tokens: prompt + completion,
    completion_tokens: completion,
    prompt_tokens_details: null,
    reasoning_tokens: 0,
  };
}
