// A complete group → trajectories with advantages. Rollouts finished as infra_error (and, unless asked,
// flagged, oversize or reward-less ones) are left out of both the statistics and the loss.
//
// The rollout is the sample. Outcome estimators (GRPO, Dr.GRPO, RLOO, REINFORCE++-baseline, OPO) see one row per
// rollout, as long as all its trained tokens (rolloutValues): a rollout that left several trajectories (a
// re-serialized history, sub-agents, compactions) counts once in its group's mean and std, and its advantage reaches
// every trained token of every one of its trajectories. The tree estimator sees one row per trajectory and the
// group's prefix tree rebuilt from their token ids (tree-spec.ts), with V(n) the mean reward of the *rollouts* with a
// leaf under n. Plain REINFORCE++ is token-level: each trajectory returns its rollout's reward from its last trained
// token.
import { computeAdvantagesAsync, type EstimatorName, type RolloutBatch } from "../estimators/index.ts";
import { bytesOf, concatTyped, float32s, int32s, uint8s, type CallInfo } from "../../protocol/index.ts";
import type { GroupContext, PendingRollout, ReadyRow, RowSignal } from "./core-store.ts";
import { buildTreeSpec } from "./tree-spec.ts";

export type CoreEstimator = Exclude<EstimatorName, "gae">;
export const CORE_ESTIMATORS: readonly CoreEstimator[] = [
  "grpo",
  "dr-grpo",
  "rloo",
  "reinforce++-baseline",
  "reinforce++",
  "opo",
  "tree",
];
export type OutcomeEstimator = "grpo" | "dr-grpo" | "rloo" | "reinforce++-baseline" | "opo";
export const OUTCOME_ESTIMATORS: readonly string[] = ["grpo", "dr-grpo", "rloo", "reinforce++-baseline", "opo"];

/** Where REINFORCE++ and REINFORCE++-baseline whiten: over the training batch (the references' choice) or the group. */
export type WhitenScope = "batch" | "group";

export type DropReason = "infra_error" | "oversize" | "flagged" | "no_reward" | "zero_variance";

export interface GroupOptions {
  estimator: CoreEstimator;
  /** Train on rollouts the reconstruction flagged (missing ids or logprobs, too many leaves). Default false. */
  trainFlagged?: boolean;
  /** Drop groups whose kept rollouts all have the same reward (no signal), as DAPO's dynamic sampling. */
  dropZeroVariance?: boolean;
  whitenScope?: WhitenScope;
  /** REINFORCE++'s discount. Default 1. */
  gamma?: number;
}

export interface GroupResult {
  rows: ReadyRow[];
  kept: number;
  dropped: Array<{ rolloutId: string; reason: DropReason }>;
}

export function dropReason(r: PendingRollout, trainFlagged: boolean): DropReason | null {
  if (r.status === "infra_error") return "infra_error";
  if (r.oversize) return "oversize";
  if (r.flagged && !trainFlagged) return "flagged";
  if (r.reward === null || !Number.isFinite(r.reward)) return "no_reward";
  return null;
}

interface Traj {
  rollout: PendingRollout;
  keptIndex: number;
  row: number;
  tokenIds: Int32Array;
  lossMask: Uint8Array;
  logprobs: Float32Array;
  callIndex: Int32Array | null;
}

function trainedTrajectories(r: PendingRollout, keptIndex: number): Traj[] {
  const offsets = int32s(r.offsets, "offsets");
  const tokenIds = int32s(r.tokenIds, "token_ids");
  const lossMask = uint8s(r.lossMask);
  const logprobs = float32s(r.logprobs, "logprobs");
  const callIndex = r.callIndex?.byteLength ? int32s(r.callIndex, "call_index") : null;
  const out: Traj[] = [];
  for (let row = 0; row < r.rows; row++) {
    if (r.trained[row] !== 1) continue;
    const a = offsets[row]!;
    const b = offsets[row + 1]!;
    out.push({
      rollout: r,
      keptIndex,
      row,
      tokenIds: tokenIds.subarray(a, b),
      lossMask: lossMask.subarray(a, b),
      logprobs: logprobs.subarray(a, b),
      callIndex: callIndex?.subarray(a, b) ?? null,
    });
  }
  return out;
}

/** A row's own calls (those that sampled its tokens, in call order) and its call index remapped to them. */
function rowCalls(t: Traj): { calls: CallInfo[]; callIndex: Int32Array } {
  const n = t.tokenIds.length;
  const out = new Int32Array(n).fill(-1);
  const all = t.rollout.calls ?? [];
  if (!t.callIndex) return { calls: [], callIndex: out };
  const used = [...new Set(t.callIndex)].filter((c) => c >= 0 && c < all.length).sort((a, b) => a - b);
  const local = new Map(used.map((c, i) => [c, i]));
  for (let i = 0; i < n; i++) out[i] = local.get(t.callIndex[i]!) ?? -1;
  return { calls: used.map((c) => all[c]!), callIndex: out };
}

function signalOf(rewards: readonly number[]): RowSignal {
  if (rewards.length < 2) return "none";
  return rewards.every((x) => x === rewards[0]) ? "equal" : "ok";
}

/**
 * Outcome advantages of a group's kept rollouts, one sample each: the value every trained token of rollout u gets
 * (before any whitening over a training batch). The same computation serves the core's batches and advantages on
 * request (ComputeAdvantages over a served batch), so the two agree.
 */
export async function rolloutValues(
  estimator: OutcomeEstimator,
  ctx: GroupContext,
  whitenScope: WhitenScope,
): Promise<Float64Array> {
  const n = ctx.rollouts.length;
  // One row per rollout, as long as its trained tokens: OPO's lengths and the whitening weights.
  const offsets = new Int32Array(n + 1);
  for (let u = 0; u < n; u++) offsets[u + 1] = offsets[u]! + ctx.tokens[u]!;
  const batch: RolloutBatch = {
    offsets,
    lossMask: new Uint8Array(offsets[n]!).fill(1),
    rewards: Float64Array.from(ctx.rewards),
    groupIds: new Int32Array(n),
  };
  const spec = estimator === "reinforce++-baseline" ? { estimator, whiten: whitenScope === "group" } : { estimator };
  const result = await computeAdvantagesAsync(batch, spec);
  return Float64Array.from({ length: n }, (_, u) =>
    ctx.tokens[u]! > 0 ? result.advantages[offsets[u]!]! : result.rowAdvantages![u]!,
  );
}

/** Token advantages of a group's trajectories for the token-level estimators (tree, reinforce++). */
async function tokenLevelAdvantages(trajs: Traj[], lossMask: Uint8Array, options: GroupOptions): Promise<Float32Array> {
  const offsets = new Int32Array(trajs.length + 1);
  trajs.forEach((t, i) => (offsets[i + 1] = offsets[i]! + t.tokenIds.length));
  const batch: RolloutBatch = {
    offsets,
    lossMask,
    rewards: Float64Array.from(trajs, (t) => t.rollout.reward!),
    groupIds: new Int32Array(trajs.length),
    rowSample: Int32Array.from(trajs, (t) => t.keptIndex),
  };
  if (options.estimator === "tree") {
    // One prefix tree per group: rollouts of one task share their prompt, and any sampled prefix they share.
    const tree = buildTreeSpec(
      trajs.map((t) => t.tokenIds),
      new Int32Array(trajs.length),
    );
    return (await computeAdvantagesAsync(batch, { estimator: "tree", tree })).advantages;
  }
  const spec = {
    estimator: "reinforce++" as const,
    gamma: options.gamma ?? 1,
    whiten: options.whitenScope === "group",
  };
  return (await computeAdvantagesAsync(batch, spec)).advantages;
}

export async function groupAdvantages(
  rollouts: readonly PendingRollout[],
  options: GroupOptions,
): Promise<GroupResult> {
  const dropped: GroupResult["dropped"] = [];
  let kept: PendingRollout[] = [];
  for (const r of rollouts) {
    const reason = dropReason(r, options.trainFlagged ?? false);
    if (reason) dropped.push({ rolloutId: r.rolloutId, reason });
    else kept.push(r);
  }
  const signal = signalOf(kept.map((r) => r.reward!));
  if (options.dropZeroVariance && kept.length > 0 && signal !== "ok") {
    for (const r of kept) dropped.push({ rolloutId: r.rolloutId, reason: "zero_variance" });
    kept = [];
  }
  const trajs = kept.flatMap((r, k) => trainedTrajectories(r, k));
  const lossMask = concatTyped(
    Uint8Array,
    trajs.map((t) => t.lossMask),
  );
  const context: GroupContext = {
    rollouts: kept.map((r) => r.rolloutId),
    rewards: kept.map((r) => r.reward!),
    tokens: kept.map(() => 0),
  };
  for (const t of trajs) for (const m of t.lossMask) context.tokens[t.keptIndex]! += m;

  let advantages: Float32Array;
  if (options.estimator === "tree" || options.estimator === "reinforce++") {
    advantages = await tokenLevelAdvantages(trajs, lossMask, options);
  } else {
    const values = await rolloutValues(options.estimator, context, options.whitenScope ?? "batch");
    advantages = new Float32Array(lossMask.length);
    let at = 0;
    for (const t of trajs) {
      const v = values[t.keptIndex]!;
      for (let i = 0; i < t.lossMask.length; i++) advantages[at + i] = t.lossMask[i] ? v : 0;
      at += t.lossMask.length;
    }
  }

  const rows: ReadyRow[] = [];
  let at = 0;
  for (const t of trajs) {
    const n = t.tokenIds.length;
    const adv = advantages.subarray(at, at + n);
    at += n;
    if (!t.lossMask.some((m) => m === 1)) continue; // nothing to train in it
    const r = t.rollout;
    const { calls, callIndex } = rowCalls(t);
    const last = calls[calls.length - 1];
    rows.push({
      rolloutId: r.rolloutId,
      trajectoryId: r.trajectoryIds[t.row] ?? `${r.rolloutId}:${t.row}`,
      groupKey: r.groupKey,
      group: r.group,
      task: r.task,
      harness: r.harness,
      reward: r.reward!,
      segment: r.segments[t.row] ?? "main",
      generation: r.generation ?? 0,
      late: r.late ?? false,
      signal,
      context,
      calls,
      callIndex: bytesOf(callIndex),
      finishReason: last?.finishReason ?? "",
      policyVersion: last?.policyVersion ?? "",
      tokenIds: bytesOf(t.tokenIds),
      lossMask: bytesOf(t.lossMask),
      logprobs: bytesOf(t.logprobs),
      advantages: bytesOf(adv),
    });
  }
  return { rows, kept: kept.length, dropped };
}
