// A complete group → trajectories with advantages. Rollouts finished as infra_error (and, unless asked,
// flagged, oversize or reward-less ones) are left out of both the statistics and the loss.
//
// Outcome estimators (GRPO, Dr.GRPO, RLOO, REINFORCE++-baseline, OPO) see one sample per rollout: a rollout's
// trajectories are one row to them (their tokens back to back), so a rollout that left several trajectories
// (a re-serialized history, a sub-agent) still counts once in its group's mean and std, and its advantage
// reaches every trained token of every trajectory. The tree estimator sees one row per trajectory and the
// prefix tree rebuilt from their token ids (tree-spec.ts).
import { computeAdvantagesAsync, type EstimatorName, type EstimatorSpec, type RolloutBatch } from "../estimators/index.ts";
import { bytesOf, concatTyped, float32s, int32s, uint8s } from "../../protocol/index.ts";
import type { PendingRollout, ReadyRow } from "./core-store.ts";
import { buildTreeSpec } from "./tree-spec.ts";

export type CoreEstimator = Exclude<EstimatorName, "gae">;
export const CORE_ESTIMATORS: readonly CoreEstimator[] = ["grpo", "dr-grpo", "rloo", "reinforce++-baseline", "opo", "tree"];

export type DropReason = "infra_error" | "oversize" | "flagged" | "no_reward" | "late";

export interface GroupOptions {
  estimator: CoreEstimator;
  /** Train on rollouts the reconstruction flagged (missing ids or logprobs, too many leaves). Default false. */
  trainFlagged?: boolean;
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
}

function trainedTrajectories(r: PendingRollout, keptIndex: number): Traj[] {
  const offsets = int32s(r.offsets, "offsets");
  const tokenIds = int32s(r.tokenIds, "token_ids");
  const lossMask = uint8s(r.lossMask);
  const logprobs = float32s(r.logprobs, "logprobs");
  const out: Traj[] = [];
  for (let row = 0; row < r.rows; row++) {
    if (r.trained[row] !== 1) continue;
    const a = offsets[row]!;
    const b = offsets[row + 1]!;
    out.push({ rollout: r, keptIndex, row, tokenIds: tokenIds.subarray(a, b), lossMask: lossMask.subarray(a, b), logprobs: logprobs.subarray(a, b) });
  }
  return out;
}

export async function groupAdvantages(rollouts: readonly PendingRollout[], options: GroupOptions): Promise<GroupResult> {
  const dropped: GroupResult["dropped"] = [];
  const kept: PendingRollout[] = [];
  for (const r of rollouts) {
    const reason = dropReason(r, options.trainFlagged ?? false);
    if (reason) dropped.push({ rolloutId: r.rolloutId, reason });
    else kept.push(r);
  }
  const trajs = kept.flatMap((r, k) => trainedTrajectories(r, k));
  const lossMask = concatTyped(Uint8Array, trajs.map((t) => t.lossMask));
  let batch: RolloutBatch;
  let spec: EstimatorSpec;
  if (options.estimator === "tree") {
    const offsets = new Int32Array(trajs.length + 1);
    trajs.forEach((t, i) => (offsets[i + 1] = offsets[i]! + t.tokenIds.length));
    batch = {
      offsets,
      lossMask,
      rewards: Float64Array.from(trajs, (t) => t.rollout.reward!),
      groupIds: new Int32Array(trajs.length),
    };
    const tree = buildTreeSpec(trajs.map((t) => t.tokenIds), Int32Array.from(trajs, (t) => t.keptIndex));
    spec = { estimator: "tree", tree };
  } else {
    const offsets = new Int32Array(kept.length + 1);
    for (const t of trajs) offsets[t.keptIndex + 1]! += t.tokenIds.length;
    for (let k = 0; k < kept.length; k++) offsets[k + 1]! += offsets[k]!;
    batch = { offsets, lossMask, rewards: Float64Array.from(kept, (r) => r.reward!), groupIds: new Int32Array(kept.length) };
    spec = { estimator: options.estimator } as EstimatorSpec;
  }
  const { advantages } = await computeAdvantagesAsync(batch, spec);
  const rows: ReadyRow[] = [];
  let at = 0;
  for (const t of trajs) {
    const n = t.tokenIds.length;
    const adv = advantages.subarray(at, at + n);
    at += n;
    if (!t.lossMask.some((m) => m === 1)) continue; // nothing to train in it
    const r = t.rollout;
    rows.push({
      rolloutId: r.rolloutId,
      trajectoryId: r.trajectoryIds[t.row] ?? `${r.rolloutId}:${t.row}`,
      groupKey: r.groupKey,
      group: r.group,
      task: r.task,
      harness: r.harness,
      reward: r.reward!,
      segment: r.segments[t.row] ?? "main",
      tokenIds: bytesOf(t.tokenIds),
      lossMask: bytesOf(t.lossMask),
      logprobs: bytesOf(t.logprobs),
      advantages: bytesOf(adv),
    });
  }
  return { rows, kept: kept.length, dropped };
}
