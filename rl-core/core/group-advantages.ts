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
//
// `singleton` (a group of one: advantage 0, or its raw reward as verl) and `overlong` (a rollout cut at the generation
// limit: dropped, masked out of the loss, or DAPO's soft length penalty in its reward): estimator-settings.ts.
import { computeAdvantagesAsync, type RolloutBatch } from "../estimators/index.ts";
import {
  overlongPenalty,
  type CoreEstimator,
  type OutcomeEstimator,
  type Overlong,
  type Singleton,
  type WhitenScope,
} from "./estimator-settings.ts";
import { bytesOf, concatTyped, float32s, int32s, uint8s, type CallInfo } from "../../protocol/index.ts";
import type { GroupContext, PendingRollout, ReadyRow, RowRouting, RowSignal } from "./core-store.ts";
import { buildTreeSpec } from "./tree-spec.ts";
import { isStale, rowStaleness, rowVersions, trainedRuns, type StalenessRule } from "./staleness.ts";

export type DropReason =
  "infra_error" | "oversize" | "flagged" | "no_reward" | "zero_variance" | "overlong" | "overlong_masked" | "stale";

export interface GroupOptions {
  estimator: CoreEstimator;
  /** Train on rollouts the reconstruction flagged (missing ids or logprobs, too many leaves). Default false. */
  trainFlagged?: boolean;
  /** Drop groups whose kept rollouts all have the same reward (no signal), as DAPO's dynamic sampling. */
  dropZeroVariance?: boolean;
  whitenScope?: WhitenScope;
  /** REINFORCE++'s discount. Default 1. */
  gamma?: number;
  /** A group of one kept rollout (outcome estimators): "zero" (default) or "raw". */
  singleton?: Singleton;
  /** Rollouts cut at the generation limit. Default "off" (trained like the others). */
  overlong?: Overlong;
  /** DAPO's L_cache for overlong "penalty": the length penalty ramps from 0 at maxLen − buffer to −1 at maxLen. */
  overlongBuffer?: number;
  /** DAPO's L_max for overlong "penalty" (the core's --max-len). */
  maxLen?: number;
  /** Stale tokens (staleness.ts): kept, masked out of the loss, or their rollouts dropped. Default: none judged. */
  staleness?: StalenessRule | null;
}

export interface GroupResult {
  rows: ReadyRow[];
  kept: number;
  dropped: Array<{ rolloutId: string; reason: DropReason }>;
  /** Stale trained tokens taken out of the loss (--stale mask). */
  staleMasked: number;
}

export function dropReason(r: PendingRollout, trainFlagged: boolean): DropReason | null {
  if (r.status === "infra_error") return "infra_error";
  if (r.oversize) return "oversize";
  if (r.flagged && !trainFlagged) return "flagged";
  if (r.reward === null || !Number.isFinite(r.reward)) return "no_reward";
  return null;
}

/**
 * |y| of a rollout for the overlong penalty: its sampled tokens that are trained (mask 1) over all its trained
 * trajectories — the response length of a single call as in DAPO, and for an agent every sampled token it is trained
 * on (turns, sub-agents; a token shared by re-serialized histories is trained, and counted, once). The same count
 * --max-len bounds for seq-mean-token-sum-norm, so --max-len is a budget per rollout.
 */
export function rolloutLength(r: PendingRollout): number {
  let n = 0;
  for (const t of trainedTrajectories(r, 0)) for (const m of t.lossMask) n += m;
  return n;
}

/** Whether one of the rollout's trained trajectories was cut at the generation limit (its last call: `length`). */
export function cutAtLimit(r: PendingRollout): boolean {
  return trainedTrajectories(r, 0).some((t) => rowCalls(t).calls.at(-1)?.finishReason === "length");
}

interface Traj {
  rollout: PendingRollout;
  keptIndex: number;
  row: number;
  tokenIds: Int32Array;
  lossMask: Uint8Array;
  logprobs: Float32Array;
  callIndex: Int32Array | null;
  routing: RowRouting | null;
}

/** A trajectory with its tokens' versions. */
interface JudgedTraj extends Traj {
  versions: Array<string | null>;
}

function trainedTrajectories(r: PendingRollout, keptIndex: number): Traj[] {
  const offsets = int32s(r.offsets, "offsets");
  const tokenIds = int32s(r.tokenIds, "token_ids");
  const lossMask = uint8s(r.lossMask);
  const logprobs = float32s(r.logprobs, "logprobs");
  const callIndex = r.callIndex?.byteLength ? int32s(r.callIndex, "call_index") : null;
  const routing = r.routing ?? null;
  const rowBytes = routing ? routing.layers * routing.topK * (routing.dtype === "uint8" ? 1 : 2) : 0;
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
      routing: routing && { ...routing, data: routing.data.subarray(a * rowBytes, b * rowBytes) },
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

/** The version of each token of a trajectory (null on context). */
function trajVersions(t: Traj): Array<string | null> {
  const { calls, callIndex } = rowCalls(t);
  return rowVersions(calls, callIndex, t.lossMask);
}

/** Whether a rollout has a trained token older than the rule allows. */
function hasStaleToken(r: PendingRollout, rule: StalenessRule): boolean {
  return trainedTrajectories(r, 0).some((t) => {
    const versions = trajVersions(t);
    return versions.some((v, i) => t.lossMask[i] === 1 && isStale(v, rule));
  });
}

/** A group of one has no baseline ("none"), unless singletons are "raw": then its baseline is 0, as verl's. */
function signalOf(rewards: readonly number[], singleton: Singleton): RowSignal {
  if (rewards.length < 2) return singleton === "raw" && rewards.length === 1 ? "ok" : "none";
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
  singleton: Singleton = "zero",
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
  const spec =
    estimator === "reinforce++-baseline"
      ? { estimator, whiten: whitenScope === "group", singleton }
      : { estimator, singleton };
  const result = await computeAdvantagesAsync(batch, spec);
  return Float64Array.from({ length: n }, (_, u) =>
    ctx.tokens[u]! > 0 ? result.advantages[offsets[u]!]! : result.rowAdvantages![u]!,
  );
}

/**
 * Token advantages of a group's trajectories for the token-level estimators (tree, branch-grpo, reinforce++). `rewards[k]` is
 * kept rollout k's reward (as shaped), `kept` the number of kept rollouts.
 */
async function tokenLevelAdvantages(
  trajs: Traj[],
  lossMask: Uint8Array,
  rewards: readonly number[],
  kept: number,
  options: GroupOptions,
): Promise<Float32Array> {
  const offsets = new Int32Array(trajs.length + 1);
  trajs.forEach((t, i) => (offsets[i + 1] = offsets[i]! + t.tokenIds.length));
  if (options.estimator === "tree" || options.estimator === "branch-grpo") {
    // One prefix tree per group: rollouts of one task share their prompt, and any sampled prefix they share.
    // A kept rollout that left no trained trajectory still counts in V(root), the group mean, as in every outcome
    // estimator: it joins as an empty row, a tree of its own with no tokens (so no advantage of its own), hung under
    // the group's virtual root beside the others (issue 22 item 6).
    const present = new Set(trajs.map((t) => t.keptIndex));
    const alone = Array.from({ length: kept }, (_, k) => k).filter((k) => !present.has(k));
    const rowsIds = [...trajs.map((t) => t.tokenIds), ...alone.map(() => new Int32Array(0))];
    const samples = [...trajs.map((t) => t.keptIndex), ...alone];
    const all = new Int32Array(rowsIds.length + 1);
    all.set(offsets);
    all.fill(offsets[trajs.length]!, trajs.length + 1);
    const tree = buildTreeSpec(
      rowsIds,
      // The trajectories share one trie; each empty row is a tree alone (ids past any kept index).
      Int32Array.from(samples, (k, i) => (i < trajs.length ? 0 : kept + k)),
    );
    const batch: RolloutBatch = {
      offsets: all,
      lossMask,
      rewards: Float64Array.from(samples, (k) => rewards[k]!),
      groupIds: new Int32Array(rowsIds.length),
      rowSample: Int32Array.from(samples),
    };
    return (await computeAdvantagesAsync(batch, { estimator: options.estimator, tree })).advantages;
  }
  const batch: RolloutBatch = {
    offsets,
    lossMask,
    rewards: Float64Array.from(trajs, (t) => rewards[t.keptIndex]!),
    groupIds: new Int32Array(trajs.length),
  };
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
  const overlong = options.overlong ?? "off";
  const dropped: GroupResult["dropped"] = [];
  let kept: PendingRollout[] = [];
  const rule = options.staleness ?? null;
  for (const r of rollouts) {
    const reason =
      dropReason(r, options.trainFlagged ?? false) ??
      (overlong === "drop" && cutAtLimit(r) ? "overlong" : null) ??
      (rule?.mode === "drop" && hasStaleToken(r, rule) ? "stale" : null);
    if (reason) dropped.push({ rolloutId: r.rolloutId, reason });
    else kept.push(r);
  }
  // The rewards the estimators see: DAPO's length penalty added with overlong "penalty".
  const shaped = (r: PendingRollout) =>
    overlong === "penalty"
      ? r.reward! + overlongPenalty(rolloutLength(r), options.maxLen ?? 0, options.overlongBuffer ?? 0)
      : r.reward!;
  let rewards = kept.map(shaped);
  const signal = signalOf(rewards, options.singleton ?? "zero");
  if (options.dropZeroVariance && kept.length > 0 && signal !== "ok") {
    for (const r of kept) dropped.push({ rolloutId: r.rolloutId, reason: "zero_variance" });
    kept = [];
    rewards = [];
  }
  // Overlong "mask": the rollout stays in its group's statistics (its reward in the mean, its trajectories in the
  // tree) but none of its tokens is trained: its loss mask is zeroed, so its rows carry nothing and are not sent, and
  // its trained-token count (OPO's length, the whitening weight) is 0, as a zero response mask gives in verl.
  const masked = new Set<number>();
  if (overlong === "mask") {
    kept.forEach((r, k) => {
      if (!cutAtLimit(r)) return;
      masked.add(k);
      dropped.push({ rolloutId: r.rolloutId, reason: "overlong_masked" });
    });
  }
  // Each trajectory's token versions, by their places in their calls' answers.
  let staleMasked = 0;
  const trajs = kept.flatMap((r, k) =>
    trainedTrajectories(r, k).map((t): JudgedTraj => {
      const versions = trajVersions(t);
      if (masked.has(k)) return { ...t, versions, lossMask: new Uint8Array(t.lossMask.length) };
      if (rule?.mode !== "mask") return { ...t, versions };
      // Stale tokens out of the loss, as context; the rollout stays in its group's statistics.
      const lossMask = t.lossMask.map((m, i) => (m === 1 && isStale(versions[i]!, rule) ? 0 : m));
      staleMasked += t.lossMask.reduce((n, m, i) => n + m - lossMask[i]!, 0);
      return { ...t, versions, lossMask };
    }),
  );
  const lossMask = concatTyped(
    Uint8Array,
    trajs.map((t) => t.lossMask),
  );
  const context: GroupContext = {
    rollouts: kept.map((r) => r.rolloutId),
    rewards,
    tokens: kept.map(() => 0),
  };
  for (const t of trajs) for (const m of t.lossMask) context.tokens[t.keptIndex]! += m;

  let advantages: Float32Array;
  if (options.estimator === "tree" || options.estimator === "branch-grpo" || options.estimator === "reinforce++") {
    advantages = await tokenLevelAdvantages(trajs, lossMask, rewards, kept.length, options);
  } else {
    const values = await rolloutValues(
      options.estimator,
      context,
      options.whitenScope ?? "batch",
      options.singleton ?? "zero",
    );
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
    const own = rowCalls(t);
    const { callIndex } = own;
    // The runs as a trainer reads them: over this row's trained tokens of each call.
    const calls = trainedRuns(own.calls, callIndex, t.versions, t.lossMask);
    const last = calls[calls.length - 1];
    rows.push({
      rolloutId: r.rolloutId,
      trajectoryId: r.trajectoryIds[t.row] ?? `${r.rolloutId}:${t.row}`,
      groupKey: r.groupKey,
      group: r.group,
      task: r.task,
      harness: r.harness,
      reward: rewards[t.keptIndex]!,
      segment: r.segments[t.row] ?? "main",
      generation: r.generation ?? 0,
      round: r.round ?? 0,
      late: r.late ?? false,
      signal,
      context,
      calls,
      callIndex: bytesOf(callIndex),
      ...(t.routing ? { routing: t.routing } : {}),
      finishReason: last?.finishReason ?? "",
      policyVersion: last?.policyVersion ?? "",
      ...rowStaleness(t.versions, t.lossMask, rule),
      tokenIds: bytesOf(t.tokenIds),
      lossMask: bytesOf(t.lossMask),
      logprobs: bytesOf(t.logprobs),
      advantages: bytesOf(adv),
    });
  }
  return { rows, kept: kept.length, dropped, staleMasked };
}
