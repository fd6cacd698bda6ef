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
    ...routingOf(t),
    gateway,
    cursor: m.cursor,
    receivedAt: Date.now(),
  };
}

/** The rollout's routed experts (R3), when its rows carry a well-formed set (else none: the rollout is flagged). */
function routingOf(t: RolloutMessage["trajectories"]): Pick<PendingRollout, "routing"> {
  const data = t.routedExperts;
  const dtype = t.routedExpertsDtype;
  const layers = t.moeLayers ?? 0;
  const topK = t.moeTopK ?? 0;
  if (!data?.byteLength || (dtype !== "uint8" && dtype !== "uint16") || layers < 1 || topK < 1) return {};
  const tokens = t.tokenIds.byteLength / 4;
  if (data.byteLength !== tokens * layers * topK * (dtype === "uint8" ? 1 : 2)) return {};
  return { routing: { data, dtype, layers, topK } };
}
