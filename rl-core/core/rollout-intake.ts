// A rollout as the gateway sent it → a pending rollout of the group generation it was assigned to.
import type { RolloutMessage } from "../../protocol/index.ts";
import type { PendingRollout } from "./core-store.ts";
import type { Assignment } from "./groups.ts";
import { trainedRows } from "./train-segments.ts";

const EMPTY = new Uint8Array(0);

export function parseMetadata(json: string): Record<string, unknown> {
  try {
    const v = JSON.parse(json || "{}");
    return typeof v === "object" && v !== null ? (v as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

export function toPending(
  m: RolloutMessage,
  gateway: string,
  assignment: Assignment,
  trainSegments?: readonly string[],
): PendingRollout {
  const t = m.trajectories;
  return {
    rolloutId: m.rolloutId,
    groupKey: assignment.key,
    group: m.group,
    generation: assignment.generation,
    round: assignment.round,
    late: assignment.late,
    task: m.task,
    harness: m.harness,
    status: m.status,
    reward: m.hasReward ? m.reward : null,
    declaredSize: assignment.size,
    flagged: m.flagged,
    flagReasons: m.flagReasons,
    oversize: m.oversize,
    rows: t.rows,
    offsets: t.offsets,
    tokenIds: t.tokenIds,
    lossMask: t.lossMask,
    logprobs: t.logprobs,
    trajectoryIds: m.trajectoryIds,
    segments: m.segments,
    trained: trainedRows(m, parseMetadata(m.metadataJson), trainSegments),
    calls: m.calls ?? [],
    callIndex: m.callIndex ?? EMPTY,
    gateway,
    cursor: m.cursor,
    receivedAt: Date.now(),
  };
}
