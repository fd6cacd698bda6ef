// A finished rollout as it travels on the trajectory stream: its record, and its trajectories (rebuilt from the
// stored calls) packed as little-endian token rows.
import type { RolloutRecord } from "../../store/records.ts";
import { bytesOf } from "../../protocol/arrays.ts";
import type { RolloutMessage, TokenRows } from "../../protocol/messages.ts";
import type { Reconstruction } from "../../trajectory/types.ts";
import { boundedStringify } from "../../util/bounded-json.ts";

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
    flagged: flagReasons.length > 0,
    flagReasons,
    oversize: false,
    trajectories: emptyRows(),
    trajectoryIds: [],
    segments: [],
    trained: EMPTY,
  };
}

/** The rollout's message, from its reconstruction (`reconstructStored`). */
export function rolloutMessage(rec: Reconstruction, cursor: number, rollout: RolloutRecord, maxMessageBytes: number): RolloutMessage {
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
  size += tokens * 9 + (rows + 1) * 5;
  if (size > maxMessageBytes) {
    return { ...base, oversize: true, flagged: true, flagReasons: [...base.flagReasons, `trajectories exceed ${maxMessageBytes} bytes`] };
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
  return {
    ...base,
    trajectories: {
      rows,
      offsets: bytesOf(offsets),
      tokenIds: bytesOf(tokenIds),
      lossMask: bytesOf(lossMask),
      logprobs: bytesOf(logprobs),
    },
    trajectoryIds: trajectories.map((t) => t.trajectoryId),
    segments: trajectories.map((t) => t.segment),
    trained: bytesOf(trained),
  };
}
