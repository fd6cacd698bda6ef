// A finished rollout as it travels on the trajectory stream: its record, and its trajectories (rebuilt from the
// stored calls) packed as little-endian token rows.
import type { RolloutRecord } from "../../store/records.ts";
import { bytesOf } from "../../protocol/arrays.ts";
import type { CallInfo, RolloutMessage, TokenRows } from "../../protocol/messages.ts";
import type { Reconstruction } from "../../trajectory/types.ts";
import { boundedStringify } from "../../util/bounded-json.ts";

/**
 * The calls that sampled the trajectories' tokens (one entry per call and choice, in call order) and, per token, the
 * index of the one that sampled it (-1 on context): what a trainer needs for per-turn credit, policy lag and
 * overlong filtering.
 */
function callsOf(rec: Reconstruction, offsets: Int32Array): { calls: CallInfo[]; callIndex: Int32Array } {
  const keys = new Set<string>();
  for (const t of rec.trajectories) for (const s of t.spans) keys.add(`${s.callSeq}:${s.choiceIndex}`);
  const summaries = new Map(rec.calls.map((c) => [c.callSeq, c]));
  const sorted = [...keys]
    .map((k) => k.split(":").map(Number) as [number, number])
    .sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  const index = new Map(sorted.map(([seq, choice], i) => [`${seq}:${choice}`, i]));
  const calls = sorted.map(([seq, choice]): CallInfo => {
    const summary = summaries.get(seq);
    const sampling = summary?.sampling ?? null;
    return {
      seq,
      policyVersion: summary?.policyVersion ?? "",
      ...(sampling?.temperature === undefined ? {} : { temperature: sampling.temperature }),
      ...(sampling?.topP === undefined ? {} : { topP: sampling.topP }),
      ...(sampling?.topK === undefined ? {} : { topK: sampling.topK }),
      finishReason: summary?.choices.find((c) => c.index === choice)?.finishReason ?? "",
      ...(summary?.policyVersions?.length
        ? { versionRuns: summary.policyVersions.map((r) => ({ start: r.start, version: r.version ?? "" })) }
        : {}),
    };
  });
  const callIndex = new Int32Array(offsets[offsets.length - 1]!).fill(-1);
  rec.trajectories.forEach((t, r) => {
    for (const s of t.spans)
      callIndex.fill(index.get(`${s.callSeq}:${s.choiceIndex}`)!, offsets[r]! + s.start, offsets[r]! + s.end);
  });
  return { calls, callIndex };
}

/** The trajectories' routed experts (R3) in their rows' order: [tokens, layers, topK], when they have any. */
function routedRows(trajectories: Reconstruction["trajectories"], tokens: number): Partial<TokenRows> {
  const first = trajectories.find((t) => t.routedExperts)?.routedExperts;
  if (!first) return {};
  const rowBytes = first.layers * first.topK * (first.dtype === "uint8" ? 1 : 2);
  const data = new Uint8Array(tokens * rowBytes);
  let at = 0;
  for (const t of trajectories) {
    if (t.routedExperts) data.set(t.routedExperts.data, at);
    at += t.tokenIds.length * rowBytes;
  }
  return { routedExperts: data, routedExpertsDtype: first.dtype, moeLayers: first.layers, moeTopK: first.topK };
}

const EMPTY = Buffer.alloc(0);
/** Room for the message's fields besides the token arrays. */
const FRAME_SLACK = 4096;

function emptyRows(): TokenRows {
  return { rows: 0, offsets: bytesOf(new Int32Array(1)), tokenIds: EMPTY, lossMask: EMPTY, logprobs: EMPTY };
}

/** The rollout's record without tokens (also what an oversize or unreadable rollout is sent as). */
export function bareRolloutMessage(cursor: number, rollout: RolloutRecord, flagReasons: string[]): RolloutMessage {
  return {
    cursor,
    rolloutId: rollout.id,
    group: rollout.group ?? "",
    task: rollout.task ?? "",
    harness: rollout.harness ?? "",
    status: rollout.status,
    hasReward: rollout.reward !== null,
    reward: rollout.reward ?? 0,
    metadataJson: boundedStringify(rollout.metadata ?? {}),
    finishedAtMs: rollout.finishedAt ?? 0,
    round: rollout.round ?? 0,
    flagged: flagReasons.length > 0,
    flagReasons,
    oversize: false,
    trajectories: emptyRows(),
    trajectoryIds: [],
    segments: [],
    trained: EMPTY,
    calls: [],
    callIndex: EMPTY,
  };
}

/** The rollout's message, from its reconstruction (`reconstructStored`). */
export function rolloutMessage(
  rec: Reconstruction,
  cursor: number,
  rollout: RolloutRecord,
  maxMessageBytes: number,
): RolloutMessage {
  const trajectories = rec.trajectories;
  const rows = trajectories.length;
  const offsets = new Int32Array(rows + 1);
  const base = bareRolloutMessage(cursor, rollout, rec.flags.reasons);
  base.flagged = rec.flags.flagged;
  let size = FRAME_SLACK + base.metadataJson.length + rollout.id.length;
  for (let r = 0; r < rows; r++) {
    const t = trajectories[r]!;
    offsets[r + 1] = offsets[r]! + t.tokenIds.length;
    size += t.trajectoryId.length + t.segment.length + 16;
  }
  const tokens = offsets[rows]!;
  size += tokens * 13 + (rows + 1) * 5 + rec.calls.length * 64;
  const routing = trajectories.find((t) => t.routedExperts)?.routedExperts;
  if (routing) size += tokens * routing.layers * routing.topK * (routing.dtype === "uint8" ? 1 : 2);
  if (size > maxMessageBytes) {
    return {
      ...base,
      oversize: true,
      flagged: true,
      flagReasons: [...base.flagReasons, `trajectories exceed ${maxMessageBytes} bytes`],
    };
  }
  const tokenIds = new Int32Array(tokens);
  const lossMask = new Uint8Array(tokens);
  const logprobs = new Float32Array(tokens);
  const trained = new Uint8Array(rows);
  for (let r = 0; r < rows; r++) {
    const t = trajectories[r]!;
    const at = offsets[r]!;
    tokenIds.set(t.tokenIds, at);
    lossMask.set(t.lossMask, at);
    logprobs.set(t.logprobs, at);
    trained[r] = t.trained ? 1 : 0;
  }
  const { calls, callIndex } = callsOf(rec, offsets);
  return {
    ...base,
    trajectories: {
      rows,
      offsets: bytesOf(offsets),
      tokenIds: bytesOf(tokenIds),
      lossMask: bytesOf(lossMask),
      logprobs: bytesOf(logprobs),
      ...routedRows(trajectories, tokens),
    },
    trajectoryIds: trajectories.map((t) => t.trajectoryId),
    segments: trajectories.map((t) => t.segment),
    trained: bytesOf(trained),
    calls,
    callIndex: bytesOf(callIndex),
  };
}
