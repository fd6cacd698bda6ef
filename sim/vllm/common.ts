// Pieces every vLLM route shares: model and length checks, ids, and the JSON forms of logprobs.
import { randomUUID } from "node:crypto";
import type { SimContext } from "../flavor.ts";
import { mix } from "../hash.ts";
import type { PromptTokenLogprob, TokenLogprob } from "../logprobs.ts";
import { SimHttpError, badRequest } from "../reply.ts";
import { tokenString, tokenString as qwen3TokenString } from "../../tokenizer/token-text.ts";

export const VLLM_VERSION = "0.10.2";

/** vLLM's random_uuid(): 32 hex digits. */
export function randomId(): string {
  return randomUUID().replaceAll("-", "");
}

export function checkModel(model: string | null | undefined, ctx: SimContext): void {
  if (model != null && model !== ctx.model) {
    throw new SimHttpError(404, `The model \`${model}\` does not exist.`, { type: "NotFoundError" });
  }
}

/** max_tokens as vLLM settles it: the rest of the context when absent, a 400 when the request does not fit. */
export function resolveMaxTokens(requested: number | null | undefined, promptLength: number, ctx: SimContext): number {
  const limit = ctx.maxModelLen;
  if (requested == null) {
    if (promptLength >= limit) {
      throw badRequest(
        `This model's maximum context length is ${limit} tokens. However, you requested ${promptLength} tokens in the messages, Please reduce the length of the messages.`,
      );
    }
    return limit - promptLength;
  }
  if (requested < 1) throw badRequest(`max_tokens must be at least 1, got ${requested}.`);
  if (promptLength + requested > limit) {
    throw badRequest(
      `This model's maximum context length is ${limit} tokens. However, you requested ${promptLength + requested} tokens (${promptLength} in the messages, ${requested} in the completion). Please reduce the length of the messages or completion.`,
    );
  }
  return requested;
}

export const MAX_LOGPROBS = 20;

export function checkLogprobCount(k: number): void {
  if (k > MAX_LOGPROBS) {
    throw badRequest(`Requested sample logprobs of ${k}, which is greater than max allowed: ${MAX_LOGPROBS}`);
  }
}

export function requestSeed(ctx: SimContext, seed: number | null | undefined): number {
  return seed == null ? ctx.seed : mix(ctx.seed, seed);
}

/**
 * vLLM's `prompt_logprobs` as JSON: null first, then per prompt token `{id: {logprob, rank, decoded_token}}` holding
 * the token itself and the top-k alternatives (ranked 1..k).
 */
export function promptLogprobsJson(entries: ReadonlyArray<PromptTokenLogprob | null>, k: number) {
  return entries.map((entry) => {
    if (entry === null) return null;
    const out: Record<string, { logprob: number; rank: number; decoded_token: string }> = {};
    out[entry.id] = { logprob: entry.logprob, rank: entry.rank, decoded_token: tokenString(entry.id) };
    entry.top.slice(1, k + 1).forEach((alt, i) => {
      const rank = i + 1 + (entry.rank <= i + 1 ? 1 : 0);
      if (rank <= k) out[alt.id] = { logprob: alt.logprob, rank, decoded_token: tokenString(alt.id) };
    });
    return out;
  });
}

const encoder = new TextEncoder();
const bytesOfToken = new WeakMap<TokenName, Map<number, number[]>>();

/** A token as vLLM names it in logprobs (`tokenizer.decode([id])`), by the served format (Qwen3's by default). */
type TokenName = (id: number) => string;

function chatLogprob(id: number, logprob: number, name: TokenName) {
  const token = name(id);
  let cache = bytesOfToken.get(name);
  if (!cache) bytesOfToken.set(name, (cache = new Map()));
  let bytes = cache.get(id);
  if (!bytes) cache.set(id, (bytes = Array.from(encoder.encode(token))));
  return { token, logprob, bytes };
}

/** One entry of chat `logprobs.content`; `top_logprobs` lists the first k entries in vLLM's order. */
export function chatLogprobEntry(lp: TokenLogprob, k: number, name: TokenName = tokenString) {
  return {
    ...chatLogprob(lp.id, lp.logprob, name),
    top_logprobs: lp.top.slice(0, k).map((e) => chatLogprob(e.id, e.logprob, name)),
  };
}

/** Completions logprobs for a run of tokens; `offset` is the output text length before them (in characters). */
export function completionLogprobs(
  lps: readonly TokenLogprob[],
  n: number,
  offset: number,
  tokenString: TokenName = qwen3TokenString,
) {
  const text_offset: number[] = [];
  const token_logprobs: number[] = [];
  const tokens: string[] = [];
  const top_logprobs: Record<string, number>[] = [];
  let at = offset;
  for (const lp of lps) {
    const token = tokenString(lp.id);
    text_offset.push(at);
    at += pyLength(token);
    tokens.push(token);
    token_logprobs.push(lp.logprob);
    const top: Record<string, number> = {};
    for (const e of lp.top.slice(0, n + 1)) top[tokenString(e.id)] = e.logprob;
    top_logprobs.push(top);
  }
  return { text_offset, token_logprobs, tokens, top_logprobs };
}

/** Length in characters as Python counts them (code points). */
export function pyLength(text: string): number {
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0xd800 || c > 0xdbff) n++;
  }
  return n;
}

export function validateIds(ids: readonly number[], vocabSize: number): void {
  for (const id of ids) {
    if (id < 0 || id >= vocabSize) throw badRequest(`Token id ${id} is out of vocabulary`);
  }
}
