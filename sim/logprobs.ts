// The sim's "model": a deterministic log-probability for every (seed, context, token), so logprobs reproduce exactly
// for a seed and a prefix, and a test or trainer can recompute them with `simLogprob`. Values are rounded to float32,
// as vLLM's are, and optionally perturbed by seeded gaussian noise (inference/training mismatch).
import { fnvIds, fnvStep, gaussian, mix, unit } from "./hash.ts";

export interface LogprobSettings {
  seed: number;
  /** Standard deviation of the noise added to reported values. */
  noise: number;
}

export interface TopEntry {
  id: number;
  logprob: number;
}

export interface TokenLogprob {
  id: number;
  logprob: number;
  /** vLLM's order: the sampled token first, then the top-k by rank (without the sampled token): up to k + 1 entries. */
  top: TopEntry[];
}

const MIN_LOGPROB = -9999;
/** Alternatives are drawn from the low ids, where Qwen's vocabulary holds its most common pieces. */
const ALTERNATIVE_IDS = 20000;
const NOISE_SALT = 0x5bd1e995;

/** Noise-free log-probability of `token` after `context` (prompt ++ generated prefix). */
export function simLogprob(seed: number, context: readonly number[], token: number): number {
  return baseLogprob(seed, fnvIds(context), token);
}

function baseLogprob(seed: number, contextHash: number, token: number): number {
  const u = unit(mix(seed, contextHash, token));
  return -6 * u * u;
}

function report(settings: LogprobSettings, contextHash: number, token: number, value: number): number {
  let v = value;
  if (settings.noise > 0) {
    const n = gaussian(
      mix(settings.seed ^ NOISE_SALT, contextHash, token, 1),
      mix(settings.seed ^ NOISE_SALT, contextHash, token, 2),
    );
    v += settings.noise * n;
  }
  return Math.fround(Math.max(MIN_LOGPROB, Math.min(0, v)));
}

/** Hash of a prompt, the starting context of every sampled token. */
export function contextHash(promptIds: readonly number[]): number {
  return fnvIds(promptIds);
}

/** Logprobs of each sampled id, with `k` top alternatives per position (k = 0: the sampled token only). */
export function sampledLogprobs(
  settings: LogprobSettings,
  promptHash: number,
  ids: readonly number[],
  k: number,
): TokenLogprob[] {
  const out: TokenLogprob[] = new Array(ids.length);
  let h = promptHash;
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i]!;
    const lp = baseLogprob(settings.seed, h, id);
    const sampled: TopEntry = { id, logprob: report(settings, h, id, lp) };
    out[i] = { id, logprob: sampled.logprob, top: k > 0 ? topEntries(settings, h, sampled, lp, k) : [sampled] };
    h = fnvStep(h, id);
  }
  return out;
}

// The rest of the probability mass is spread over alternatives with geometrically falling shares, so the entries
// always form part of a valid distribution. Alternative j depends only on (seed, context, j), never on how many are
// asked for, so a rank computed over many agrees with the top-k shown.
function alternatives(settings: LogprobSettings, h: number, sampled: TopEntry, lp: number, k: number): TopEntry[] {
  const rest = Math.max(1e-12, 1 - Math.exp(lp));
  const used = new Set<number>([sampled.id]);
  const out: TopEntry[] = [];
  for (let j = 0; j < k; j++) {
    let id = mix(settings.seed, h, 0xa17 + j) % ALTERNATIVE_IDS;
    while (used.has(id)) id = (id + 7919) % ALTERNATIVE_IDS;
    used.add(id);
    const share = 0.6 * Math.pow(0.4, j) * (0.5 + 0.5 * unit(mix(settings.seed, h, j, 0xbeef)));
    out.push({ id, logprob: report(settings, h, id, Math.log(rest * share)) });
  }
  return out;
}

function topEntries(settings: LogprobSettings, h: number, sampled: TopEntry, lp: number, k: number): TopEntry[] {
  const ranked = [sampled, ...alternatives(settings, h, sampled, lp, k)]
    .sort((a, b) => b.logprob - a.logprob)
    .slice(0, k);
  return [sampled, ...ranked.filter((e) => e.id !== sampled.id)];
}

/** A prompt token's logprob as vLLM reports it in `prompt_logprobs`: with its rank among the alternatives. */
export interface PromptTokenLogprob extends TokenLogprob {
  rank: number;
}

/** Alternatives a rank is counted over (the most logprobs vLLM returns). */
const RANKED_ALTERNATIVES = 20;

/**
 * vLLM's `prompt_logprobs`: null for the first token (nothing precedes it), then each token's logprob given the
 * tokens before it. Teacher forcing: the logprob of a completion's token, sent back as part of a prompt, equals the
 * one reported when it was sampled after the same prefix.
 */
export function promptLogprobs(
  settings: LogprobSettings,
  ids: readonly number[],
  k: number,
): Array<PromptTokenLogprob | null> {
  if (ids.length === 0) return [];
  const scored = sampledLogprobs(settings, contextHash(ids.slice(0, 1)), ids.slice(1), k);
  let h = contextHash(ids.slice(0, 1));
  const out: Array<PromptTokenLogprob | null> = [null];
  for (let i = 0; i < scored.length; i++) {
    const entry = scored[i]!;
    const lp = baseLogprob(settings.seed, h, entry.id);
    const above = alternatives(settings, h, entry, lp, RANKED_ALTERNATIVES).filter(
      (a) => a.logprob > entry.logprob,
    ).length;
    out.push({ ...entry, rank: 1 + above });
    h = fnvStep(h, entry.id);
  }
  return out;
}
