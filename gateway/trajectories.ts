// A rollout's trajectories, rebuilt from its stored calls: on demand for an open rollout, and when it is finished.
import {
  reconstructRollout,
  rolloutTrainSegments,
  type ChatFormat,
  type Reconstruction,
  type SegmentKind,
} from "../trajectory/index.ts";
import type { RolloutRecord } from "../store/records.ts";
import type { Store } from "../store/store.ts";

export interface TrajectorySettings {
  /** Segment kinds trained (default: main agent only); a rollout's metadata `train_segments` wins. */
  trainSegments?: readonly SegmentKind[];
  /** Flag a rollout with more non-dead leaves than this (default 64). */
  maxLeaves?: number;
  /** The served model's turn markers (default: Qwen3's). */
  chatFormat?: ChatFormat;
}

export function reconstructStored(
  store: Store,
  rollout: RolloutRecord,
  settings: TrajectorySettings = {},
): Reconstruction {
  return reconstructRollout(store.listCallTokens(rollout.id), {
    rolloutId: rollout.id,
    reward: rollout.reward,
    trainSegments: rolloutTrainSegments(rollout.metadata) ?? settings.trainSegments,
    maxLeaves: settings.maxLeaves,
    chatFormat: settings.chatFormat,
  });
}
