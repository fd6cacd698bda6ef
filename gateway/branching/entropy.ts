// The policy's entropy at each sampled position of a backbone's calls, for picking branch points
// (docs/runner.md#branching). A rollout created with `metadata.entropy_top_k: k` has its calls ask the upstream for
// the k most likely tokens at each position (vLLM and SGLang: chat `top_logprobs: k` beside `logprobs: true`,
// completions `logprobs: k`) when the harness asked for no logprobs of its own; what the harness receives does not
// change, since the logprobs it did not ask for are taken out of its answer as always. The capture keeps one number
// per sampled token: the entropy of those top entries (the sampled token's among them), truncated to the top k with
// the rest of the mass counted as one outcome, so a lower bound of the full distribution's entropy.
import type { IncomingMessage, ServerResponse } from "node:http";
import type { RolloutRecord } from "../../store/records.ts";
import { GatewayError } from "../errors.ts";
import { isObject, type Json } from "../upstream/fields.ts";

export const ENTROPY_TOP_K = "entropy_top_k";
/** vLLM's default --max-logprobs; SGLang's OpenAI layer takes the same counts. */
export const MAX_TOP_K = 20;

/** Refuses a metadata.entropy_top_k that is not a whole number in 1..20. */
export function checkEntropyTopK(metadata: Record<string, unknown> | undefined): void {
  const k = metadata?.[ENTROPY_TOP_K];
  if (k === undefined) return;
  if (typeof k !== "number" || !Number.isInteger(k) || k < 1 || k > MAX_TOP_K)
    throw new GatewayError(
      "RLGATE_BAD_REQUEST",
      `metadata.${ENTROPY_TOP_K} must be a whole number in 1..${MAX_TOP_K}`,
      {
        param: `metadata.${ENTROPY_TOP_K}`,
      },
    );
}

const asked = new WeakMap<IncomingMessage, number>();
const answered = new WeakSet<ServerResponse>();

/** Whether the harness's own request asks for logprobs (then it is forwarded as it asked, and nothing is added). */
function harnessWantsLogprobs(body: unknown): boolean {
  if (!isObject(body)) return false;
  const lp = body["logprobs"];
  if (lp !== undefined && lp !== null && lp !== false) return true;
  if (body["top_logprobs"] !== undefined && body["top_logprobs"] !== null) return true;
  const include = body["include"];
  return Array.isArray(include) && include.some((item) => typeof item === "string" && item.includes("logprobs"));
}

/** Marks a call of a rollout with `entropy_top_k` to ask the upstream for its top entries. */
export function askTopLogprobs(
  call: { req: IncomingMessage; res: ServerResponse; body: unknown },
  rollout: RolloutRecord | undefined,
): void {
  const k = rollout?.metadata?.[ENTROPY_TOP_K];
  if (typeof k !== "number" || harnessWantsLogprobs(call.body)) return;
  asked.set(call.req, k);
  answered.add(call.res);
}

/** Whether the call answered on `res` asked for top entries: its stream's chunks are then parsed whole. */
export function topEntriesAsked(res: ServerResponse): boolean {
  return answered.has(res);
}

/** The forwarded body with the top entries asked for, where the call was marked. */
export function withTopLogprobs(req: IncomingMessage, forwarded: Json, upstreamPath: string): Json {
  const k = asked.get(req);
  if (k === undefined) return forwarded;
  if (upstreamPath.endsWith("/chat/completions")) return { ...forwarded, logprobs: true, top_logprobs: k };
  const current = typeof forwarded["logprobs"] === "number" ? forwarded["logprobs"] : 0;
  return { ...forwarded, logprobs: Math.max(current, k) };
}

/**
 * The entropy of one position from its top entries' logprobs (the sampled token's included; repeated entries count
 * once): −Σ p log p over them, and the rest of the mass, 1 − Σ p, as one more outcome.
 */
export function topEntropy(logprobs: readonly number[]): number {
  let h = 0;
  let mass = 0;
  for (const lp of logprobs) {
    if (!Number.isFinite(lp)) continue;
    const p = Math.exp(lp);
    mass += p;
    h -= p * lp;
  }
  const rest = 1 - mass;
  if (rest > 1e-12) h -= rest * Math.log(rest);
  return h;
}

/** Per chat logprob entry (`logprobs.content[i]`): its entropy, or null when no entry listed top alternatives. */
export function chatEntropies(entries: readonly unknown[]): number[] | null {
  // Every call is read this way and most list none (vLLM writes `top_logprobs: []` unless asked): look before building.
  if (!entries.some(listsAlternatives)) return null;
  return entries.map((entry) => {
    if (!isObject(entry)) return Number.NaN;
    const seen = new Map<string, number>();
    if (typeof entry["logprob"] === "number") seen.set(String(entry["token"]), entry["logprob"]);
    const top = entry["top_logprobs"];
    if (Array.isArray(top))
      for (const alt of top) {
        if (isAlternative(alt)) seen.set(String(alt["token"]), alt["logprob"]);
      }
    return topEntropy([...seen.values()]);
  });
}

/** Whether a chat logprob entry lists a top alternative with a logprob. */
function listsAlternatives(entry: unknown): boolean {
  if (!isObject(entry)) return false;
  const top = entry["top_logprobs"];
  return Array.isArray(top) && top.some(isAlternative);
}

/** A top alternative the entropy counts: one with a logprob. */
function isAlternative(alt: unknown): alt is Json & { logprob: number } {
  return isObject(alt) && typeof alt["logprob"] === "number";
}
