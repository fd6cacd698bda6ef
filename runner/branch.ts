// `rlgate run --branch K`: after each backbone rollout, K branch rollouts of it (docs/runner.md#branching). Each one
// runs the harness again from the task image in a fresh sandbox; the gateway answers its calls before the decision
// point with the backbone's recorded answers and samples from the point on. This file picks the points, and measures
// what a branch cost: the tokens the model sampled for it, against the backbone's (a full new rollout's) count.
import type { ControlClient } from "./control-client.ts";
import { branchPoints, decisionCalls, type BranchAt, type RecordedCall } from "./branch-points.ts";
import type { RolloutResult } from "./rollout.ts";

export interface BranchOptions {
  /** Branches per backbone rollout. */
  k: number;
  at: BranchAt;
  onDivergence: "sample" | "drop";
  /**
   * With entropy points: how many top logprobs the backbone's calls ask for (1..20, default 5), from which the
   * gateway records each sampled token's entropy.
   */
  entropyTopK?: number;
  /**
   * Seeds for the decision calls, reproducible: branch k of sample s is sampled with a seed drawn from (seed, s, k).
   * Default: the gateway draws each branch's seed from its rollout id.
   */
  seed?: number;
}

/** What one branch rollout is: its backbone, its point, its number among the backbone's branches (1..K). */
export interface BranchJob {
  of: string;
  atCall: number;
  /** A token position in that call (tokens mode); absent: the whole call is sampled anew. */
  atToken?: number;
  index: number;
  onDivergence: "sample" | "drop";
  seed?: number;
}

export interface BranchCost {
  /** Calls answered from the backbone (no upstream call). */
  replayedCalls: number;
  /** Calls that went to the model. */
  sampledCalls: number;
  /** Tokens the model sampled for this branch. */
  sampledTokens: number;
  /** Tokens the model sampled for the backbone: what a full new rollout cost. */
  backboneSampledTokens: number;
  /** Set when a prompt before the point differed from the backbone's (metadata.branch.divergence). */
  divergence: { at: number; reason: string; action: string } | null;
}

function sampledTokens(calls: readonly RecordedCall[]): number {
  let n = 0;
  for (const c of calls) for (const choice of c.choices) n += choice.token_ids.length;
  return n;
}

export const DEFAULT_ENTROPY_TOP_K = 5;

/** The top logprobs a backbone's calls ask for: with entropy points only (undefined otherwise). */
export function entropyTopK(options: BranchOptions): number | undefined {
  if (options.at.kind !== "entropy" && options.at.kind !== "token-entropy") return undefined;
  return options.entropyTopK ?? DEFAULT_ENTROPY_TOP_K;
}

/** A seed per (run seed, sample, branch): branches at one prompt, of one backbone or of several, differ. */
export function branchSeed(seed: number, sample: number, index: number): number {
  let h = seed >>> 0;
  for (const v of [sample, index]) h = (Math.imul(h ^ v, 0x9e3779b1) + 0x7f4a7c15) >>> 0;
  return h & 0x7fffffff;
}

/**
 * The branches of a finished backbone: K points picked from its calls. A backbone that did not end ok, or left no
 * call to branch at, gets none: `skip` says why (its K rollouts are then finished as infra_error, so its group fills).
 */
export async function planBranches(
  control: ControlClient,
  backbone: RolloutResult,
  options: BranchOptions,
): Promise<{ jobs: BranchJob[] } | { skip: string }> {
  if (backbone.rolloutId === null || backbone.status !== "ok")
    return { skip: `its backbone ${backbone.rolloutId ?? "(never created)"} ended ${backbone.status}` };
  try {
    const calls = (await control.calls(backbone.rolloutId)) as RecordedCall[];
    const points = branchPoints(calls, options.k, options.at);
    return {
      jobs: points.map((point, i) => ({
        of: backbone.rolloutId!,
        atCall: point.call,
        ...(point.token === undefined ? {} : { atToken: point.token }),
        index: i + 1,
        onDivergence: options.onDivergence,
        ...(options.seed === undefined ? {} : { seed: branchSeed(options.seed, backbone.sample, i + 1) }),
      })),
    };
  } catch (error) {
    return { skip: `no branch point in backbone ${backbone.rolloutId}: ${(error as Error).message}` };
  }
}

/** What the branch cost, read back from the gateway once it finished. */
export async function branchCost(control: ControlClient, job: BranchJob, rolloutId: string): Promise<BranchCost> {
  const calls = (await control.calls(rolloutId)) as RecordedCall[];
  const own = calls.filter((c) => !c.replay_of);
  const backbone = decisionCalls((await control.calls(job.of)) as RecordedCall[]);
  const meta = (await control.rollout(rolloutId)).metadata?.branch;
  return {
    replayedCalls: calls.length - own.length,
    sampledCalls: own.length,
    sampledTokens: sampledTokens(own),
    backboneSampledTokens: sampledTokens(backbone),
    divergence: meta?.divergence ?? null,
  };
}

/** The run summary's branching lines: per backbone, what its branches cost against a full rollout each. */
export function branchSummary(results: readonly RolloutResult[]): string {
  const branches = results.filter((r) => r.branch);
  if (branches.length === 0) return "";
  const lines = ["branches (model tokens sampled: branch / its backbone, a full rollout):"];
  let own = 0;
  let full = 0;
  for (const r of branches) {
    const b = r.branch!;
    const cost = b.cost;
    const div = cost?.divergence ? `; diverged at call ${cost.divergence.at} (${cost.divergence.action})` : "";
    const at = `call ${b.atCall}${b.atToken === undefined ? "" : ` token ${b.atToken}`}`;
    lines.push(
      cost
        ? `  ${r.task}#${r.sample}.${b.index} at ${at}: ${cost.replayedCalls} replayed, ${cost.sampledCalls} sampled calls; ${cost.sampledTokens} / ${cost.backboneSampledTokens} tokens${div}`
        : `  ${r.task}#${r.sample}.${b.index} at ${at}: ${r.status}`,
    );
    if (cost) {
      own += cost.sampledTokens;
      full += cost.backboneSampledTokens;
    }
  }
  if (full > 0)
    lines.push(
      `  ${branches.length} branches sampled ${own} tokens, ${(own / full).toFixed(3)} of ${full} for as many full rollouts`,
    );
  return lines.join("\n");
}
