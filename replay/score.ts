// `rlgate replay score`: teacher-forced scoring. Every captured completion is sent back to an inference server as a
// token-id prompt (its prompt ids ++ its sampled ids, `max_tokens: 1`, `prompt_logprobs: 0`), and the logprob the
// server now gives each sampled token is compared with the one captured when it was sampled. Another vLLM version,
// another precision or the weights after a sync show up here as drift, before they corrupt importance ratios.
import type { CallRecord, RolloutRecord } from "../store/records.ts";
import { agreement, type Agreement } from "../util/agreement.ts";
import { tokenInContext, type Decode, type TokenInContext } from "./context.ts";
import { mapLimit, type ReplayUpstream } from "./upstream.ts";

export interface ScoreOptions {
  upstream: ReplayUpstream;
  /** Model name to ask for (default: the model each call was forwarded with). */
  model?: string;
  /** |Δlogp| above which a token is reported as the first drifted one of its call. */
  threshold: number;
  concurrency: number;
  decode: Decode;
  /** Called once per rollout scored. */
  onProgress?: () => void;
}

export interface DriftedToken extends TokenInContext {
  captured: number;
  replayed: number;
  delta: number;
}

/** One choice of one call, scored. */
export interface CompletionScore {
  rolloutId: string;
  callSeq: number;
  choiceIndex: number;
  harness: string;
  promptTokens: number;
  agreement: Agreement;
  /** The first sampled token whose |Δlogp| exceeds the threshold, in its context. */
  firstBeyond: DriftedToken | null;
}

export interface RolloutScore {
  rolloutId: string;
  group: string | null;
  harness: string;
  completions: number;
  agreement: Agreement;
  firstBeyond: (DriftedToken & { callSeq: number; choiceIndex: number }) | null;
}

export interface Skipped {
  rolloutId: string;
  callSeq: number;
  choiceIndex: number | null;
  reason: string;
}

export interface ScoreReport {
  upstream: string;
  threshold: number;
  rollouts: RolloutScore[];
  completions: CompletionScore[];
  /** Per harness and "*" for everything, as rl-core reports training–inference consistency. */
  byHarness: Record<string, Agreement>;
  overall: Agreement;
  /** Completions not scored because there is nothing trustworthy to compare (failed calls, retokenized ids…). */
  skipped: Skipped[];
  /** Completions the upstream would not score: the report is incomplete. */
  errors: Skipped[];
}

interface Job {
  rollout: RolloutRecord;
  call: CallRecord;
  choiceIndex: number;
  sampled: number[];
  captured: number[];
}

/** The completions of a rollout's calls that can be scored; the others with the reason they cannot. */
export function scorableCompletions(
  rollout: RolloutRecord,
  calls: readonly CallRecord[],
): { jobs: Job[]; skipped: Skipped[] } {
  const jobs: Job[] = [];
  const skipped: Skipped[] = [];
  for (const call of calls) {
    const skip = (reason: string, choiceIndex: number | null = null) =>
      skipped.push({ rolloutId: rollout.id, callSeq: call.seq, choiceIndex, reason });
    if (call.status !== "ok") skip(`call ended ${call.status}`);
    else if (call.tokenSource !== "upstream") skip(`token ids are ${call.tokenSource}`);
    else if (!call.promptTokenIds?.length) skip("no prompt token ids");
    else {
      for (const choice of call.choices) {
        if (choice.tokenIds.length === 0) skip("no sampled tokens", choice.index);
        else if (!choice.logprobs) skip("no captured logprobs", choice.index);
        else
          jobs.push({ rollout, call, choiceIndex: choice.index, sampled: choice.tokenIds, captured: choice.logprobs });
      }
    }
  }
  return { jobs, skipped };
}

function forwardedModel(call: CallRecord): string | undefined {
  const model = (call.requestForwarded as { model?: unknown } | null)?.model;
  return typeof model === "string" ? model : (call.model ?? undefined);
}

/** The replayed logprob of each sampled token, read from vLLM's prompt_logprobs. */
async function replayLogprobs(job: Job, options: ScoreOptions): Promise<number[]> {
  const prompt = job.call.promptTokenIds!;
  const ids = [...prompt, ...job.sampled];
  const model = options.model ?? forwardedModel(job.call);
  const body = { ...(model ? { model } : {}), prompt: ids, max_tokens: 1, temperature: 0, prompt_logprobs: 0 };
  const answer = await options.upstream.post("/v1/completions", body);
  const entries = answer["choices"]?.[0]?.["prompt_logprobs"] as
    Array<Record<string, { logprob: number }> | null> | undefined;
  if (!Array.isArray(entries)) {
    throw new Error(
      "the upstream returned no prompt_logprobs (a vLLM /v1/completions that accepts prompt_logprobs is needed)",
    );
  }
  if (entries.length !== ids.length)
    throw new Error(`the upstream scored ${entries.length} prompt tokens, ${ids.length} were sent`);
  return job.sampled.map((id, j) => {
    const entry = entries[prompt.length + j]?.[String(id)];
    if (!entry || typeof entry.logprob !== "number")
      throw new Error(`no prompt logprob for sampled token ${j} (id ${id})`);
    return entry.logprob;
  });
}

function firstBeyond(job: Job, replayed: readonly number[], options: ScoreOptions): DriftedToken | null {
  for (let j = 0; j < job.sampled.length; j++) {
    const captured = job.captured[j]!;
    const delta = replayed[j]! - captured;
    if (Number.isFinite(captured) && Math.abs(delta) > options.threshold) {
      const ids = [...job.call.promptTokenIds!, ...job.sampled];
      return {
        ...tokenInContext(ids, job.call.promptTokenIds!.length + j, options.decode),
        captured,
        replayed: replayed[j]!,
        delta,
      };
    }
  }
  return null;
}

const harnessOf = (rollout: RolloutRecord) => rollout.harness || "unknown";

/** Runs at most `n` tasks at once, whoever asks. */
function limiter(n: number): <T>(task: () => Promise<T>) => Promise<T> {
  let active = 0;
  const waiting: Array<() => void> = [];
  return async (task) => {
    if (active >= n) await new Promise<void>((resolve) => waiting.push(resolve));
    active++;
    try {
      return await task();
    } finally {
      active--;
      waiting.shift()?.();
    }
  };
}

/**
 * Scores the rollouts' completions. Rollouts are loaded a few at a time (`loadCalls`) and dropped once scored, so a
 * large selection is never held in memory whole: only the sampled tokens' two logprobs are kept for the figures.
 */
export async function scoreRollouts(
  rollouts: readonly RolloutRecord[],
  loadCalls: (rolloutId: string) => Promise<readonly CallRecord[]>,
  options: ScoreOptions,
): Promise<ScoreReport> {
  const skipped: Skipped[] = [];
  const errors: Skipped[] = [];
  const completions: CompletionScore[] = [];
  const pairs = new Map<string, { captured: number[]; replayed: number[] }>();
  const add = (key: string, captured: readonly number[], replayed: readonly number[]) => {
    let p = pairs.get(key);
    if (!p) pairs.set(key, (p = { captured: [], replayed: [] }));
    for (let i = 0; i < captured.length; i++) {
      p.captured.push(captured[i]!);
      p.replayed.push(replayed[i]!);
    }
  };
  const limit = limiter(options.concurrency);
  const scored = new Map<string, CompletionScore[]>();
  await mapLimit(rollouts, options.concurrency, async (rollout) => {
    const found = scorableCompletions(rollout, await loadCalls(rollout.id));
    skipped.push(...found.skipped);
    const results = await Promise.all(
      found.jobs.map((job) =>
        limit(async () => {
          try {
            return await replayLogprobs(job, options);
          } catch (error) {
            errors.push({
              rolloutId: rollout.id,
              callSeq: job.call.seq,
              choiceIndex: job.choiceIndex,
              reason: (error as Error).message,
            });
            return null;
          }
        }),
      ),
    );
    const own: CompletionScore[] = [];
    found.jobs.forEach((job, i) => {
      const replayed = results[i];
      if (!replayed) return;
      own.push({
        rolloutId: rollout.id,
        callSeq: job.call.seq,
        choiceIndex: job.choiceIndex,
        harness: harnessOf(rollout),
        promptTokens: job.call.promptTokenIds!.length,
        agreement: agreement(job.captured, replayed),
        firstBeyond: firstBeyond(job, replayed, options),
      });
      add(`r:${rollout.id}`, job.captured, replayed);
    });
    scored.set(rollout.id, own);
    options.onProgress?.();
  });

  // Figures are gathered in the order of the selection, whatever order the rollouts finished scoring in.
  for (const rollout of rollouts) {
    const own = scored.get(rollout.id) ?? [];
    completions.push(...own);
    const p = pairs.get(`r:${rollout.id}`);
    if (p) {
      add(`h:${harnessOf(rollout)}`, p.captured, p.replayed);
      add("*", p.captured, p.replayed);
    }
  }
  const figures = (key: string) => {
    const p = pairs.get(key);
    return agreement(p?.captured ?? [], p?.replayed ?? []);
  };
  const rolloutScores: RolloutScore[] = rollouts.map((rollout) => {
    const own = scored.get(rollout.id) ?? [];
    const first = own.find((c) => c.firstBeyond);
    return {
      rolloutId: rollout.id,
      group: rollout.group,
      harness: harnessOf(rollout),
      completions: own.length,
      agreement: figures(`r:${rollout.id}`),
      firstBeyond: first ? { ...first.firstBeyond!, callSeq: first.callSeq, choiceIndex: first.choiceIndex } : null,
    };
  });
  const byHarness: Record<string, Agreement> = { "*": figures("*") };
  for (const harness of [...new Set(rollouts.map(harnessOf))].sort()) byHarness[harness] = figures(`h:${harness}`);
  const bySeq = (a: Skipped, b: Skipped) => a.rolloutId.localeCompare(b.rolloutId) || a.callSeq - b.callSeq;
  return {
    upstream: options.upstream.url,
    threshold: options.threshold,
    rollouts: rolloutScores,
    completions,
    byHarness,
    overall: byHarness["*"]!,
    skipped: skipped.sort(bySeq),
    errors: errors.sort(bySeq),
  };
}
