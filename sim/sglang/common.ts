// Pieces of SGLang's response shapes shared by its routes.
import type { SimContext } from "../flavor.ts";
import { sglangRoutedExperts as routedPayload } from "../moe.ts";
import { badRequest } from "../reply.ts";
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

/**
 * `sglext` of a response that asked for routed experts (`return_routed_experts`), for the request's first choice
 * (SGLang builds it from the first result only), rows from `routed_experts_start_len` to seqlen − 1; null when not
 * asked or the model is dense. A start outside [0, prompt tokens] is refused as SGLang refuses it.
 */
export function sglangRoutedExperts(
  req: Record<string, unknown>,
  ctx: SimContext,
  promptIds: number[],
  sampled: number[] | undefined,
): { routed_experts: string } | null {
  if (req["return_routed_experts"] !== true || !ctx.moe || sampled === undefined) return null;
  return { routed_experts: routedPayload(ctx.seed, ctx.moe, promptIds, sampled, routedStart(req, promptIds)) };
}

/** `routed_experts_start_len`, checked against the prompt (a 400 outside [0, prompt tokens]). */
export function routedStart(req: Record<string, unknown>, promptIds: number[]): number {
  const start = req["routed_experts_start_len"] ?? 0;
  if (typeof start !== "number" || !Number.isInteger(start) || start < 0 || start > promptIds.length) {
    throw badRequest(
      `routed_experts_start_len must be in [0, ${promptIds.length}] (the prompt's tokens), got ${JSON.stringify(start)}.`,
    );
  }
  return start;
}
