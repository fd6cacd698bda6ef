// `rlgate export`: selected rollouts' trajectories as rows a Python trainer reads — one per trajectory, the columns
// named as a trainer names them. The same rows become JSONL lines (export-jsonl.ts) or Parquet rows (export-parquet.ts).
import type { CallRecord, RolloutRecord } from "../store/records.ts";
import {
  fromCallRecord,
  type CallSummary,
  reconstructRollout,
  type ChatFormat,
  type SegmentKind,
  type Trajectory,
} from "../trajectory/index.ts";
import { rolloutTrainSegments } from "../trajectory/train-segments.ts";
import { routingValues } from "../util/routed-experts.ts";
import { trajectoryVersionRuns, type VersionRun } from "./export-versions.ts";

export interface ExportRow {
  rollout_id: string;
  /** Position of the trajectory in its rollout (0, 1, …), in the reconstruction's order. */
  trajectory_index: number;
  trajectory_id: string;
  group: string | null;
  task: string | null;
  harness: string | null;
  /** The rollout's policy version when its driver gave one (a call may name its own: see the calls). */
  policy_version: string | null;
  /** The rollout's finish status (ok, infra_error, timeout, aborted). */
  status: string;
  reward: number | null;
  segment: SegmentKind;
  segment_id: number;
  /** False for trajectories of segments that are not trained (their loss mask is all 0). */
  trained: boolean;
  /** The reconstruction flagged the rollout: not to be trained on silently. */
  flagged: boolean;
  flag_reasons: string[];
  num_tokens: number;
  token_ids: number[];
  /** 1 where the token is trained. */
  loss_mask: number[];
  /** Sampling logprob of each token: 0 on context, null where the upstream sent none. */
  logprobs: Array<number | null>;
  /** Token-level advantages are computed by the RL core, not stored with the capture: null here. */
  advantages: null;
  /** Sampled spans: [start, end) positions, the call that sampled them and whether they are trained here. */
  spans: Array<{ start: number; end: number; call_seq: number; choice_index: number; kind: string }>;
  breaks: number;
  /**
   * The policy version of every token, as runs over positions (export-versions.ts): tokens from `start` to the next
   * run's start were sampled by `version` (null: context, or no version named). One run per change, not per token.
   */
  version_runs: VersionRun[];
  /**
   * MoE routing replay (serve --routed-experts): the experts each token was routed to, flat [num_tokens × moe_layers ×
   * moe_top_k] (numpy: `np.asarray(row.routed_experts).reshape(-1, moe_layers, moe_top_k)`); the last token's entries
   * are 0 (never a model input). Null without routing.
   */
  routed_experts?: number[] | null;
  moe_layers?: number | null;
  moe_top_k?: number | null;
}

export interface ExportOptions {
  /** Segment kinds trained; default: the rollout's own setting (metadata train_segments), else main. */
  trainSegments?: readonly SegmentKind[];
  maxLeaves?: number;
  /** Only trajectories that are trained (segment trained, rollout not flagged unless `includeFlagged`). */
  trainedOnly?: boolean;
  /** The served model's turn ids (default: Qwen3's): the gateway's, for the same trajectories. */
  chatFormat?: ChatFormat;
}

function row(
  rollout: RolloutRecord,
  t: Trajectory,
  index: number,
  flags: { flagged: boolean; reasons: string[] },
  calls: readonly CallSummary[],
): ExportRow {
  return {
    rollout_id: rollout.id,
    trajectory_index: index,
    trajectory_id: t.trajectoryId,
    group: rollout.group,
    task: rollout.task,
    harness: rollout.harness,
    policy_version: rollout.policyVersion ?? null,
    status: rollout.status,
    reward: rollout.reward,
    segment: t.segment,
    segment_id: t.segmentId,
    trained: t.trained,
    flagged: flags.flagged,
    flag_reasons: flags.reasons,
    num_tokens: t.tokenIds.length,
    token_ids: Array.from(t.tokenIds),
    loss_mask: Array.from(t.lossMask),
    logprobs: Array.from(t.logprobs, (lp) => (Number.isNaN(lp) ? null : lp)),
    advantages: null,
    spans: t.spans.map((s) => ({
      start: s.start,
      end: s.end,
      call_seq: s.callSeq,
      choice_index: s.choiceIndex,
      kind: s.kind,
    })),
    breaks: t.breaks.length,
    version_runs: trajectoryVersionRuns(t, calls),
    ...routedColumns(t),
  };
}

function routedColumns(t: Trajectory): Pick<ExportRow, "routed_experts" | "moe_layers" | "moe_top_k"> {
  const routing = t.routedExperts;
  if (!routing) return { routed_experts: null, moe_layers: null, moe_top_k: null };
  return {
    routed_experts: Array.from(routingValues(routing)),
    moe_layers: routing.layers,
    moe_top_k: routing.topK,
  };
}

/** The rows of one rollout, in the reconstruction's order. */
export function exportRows(
  rollout: RolloutRecord,
  calls: readonly CallRecord[],
  options: ExportOptions = {},
): ExportRow[] {
  const rec = reconstructRollout(calls.map(fromCallRecord), {
    rolloutId: rollout.id,
    reward: rollout.reward,
    trainSegments: options.trainSegments ?? rolloutTrainSegments(rollout.metadata) ?? undefined,
    maxLeaves: options.maxLeaves,
    ...(options.chatFormat ? { chatFormat: options.chatFormat } : {}),
  });
  const flags = { flagged: rec.flags.flagged, reasons: rec.flags.reasons };
  // The index is the trajectory's place in the rollout, kept when --trained-only leaves some out.
  return rec.trajectories
    .map((t, i) => ({ t, i }))
    .filter(({ t }) => !options.trainedOnly || (t.trained && !rec.flags.flagged))
    .map(({ t, i }) => row(rollout, t, i, flags, rec.calls));
}

export interface ExportTotals {
  rollouts: number;
  trajectories: number;
  tokens: number;
  trainedTokens: number;
  flaggedRollouts: number;
}

/** Where export rows go: a JSONL stream or a Parquet file. */
export interface ExportSink<R = ExportRow> {
  write(rows: readonly R[]): Promise<void>;
  /** Completes the output; the bytes written. */
  finish(): Promise<{ bytes: number }>;
  /** After a failure: leaves no half-written file behind where the format allows. */
  abort(): Promise<void>;
}

export function addToTotals(totals: ExportTotals, rows: readonly ExportRow[]): void {
  totals.rollouts++;
  totals.trajectories += rows.length;
  if (rows.some((r) => r.flagged)) totals.flaggedRollouts++;
  for (const r of rows) {
    totals.tokens += r.token_ids.length;
    for (const m of r.loss_mask) totals.trainedTokens += m;
  }
}
