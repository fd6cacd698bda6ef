// Which segment kinds are trained: a setting of `rlgate serve`, `rlgate core` and `rlgate show`
// (`--train-segments main,sub_agent,compaction`) and of a rollout (its metadata `train_segments`, which wins).
import { SEGMENT_KINDS, type SegmentKind } from "./types.ts";

/** Segment kinds from "main,sub_agent" or ["main", "sub_agent"]; throws a sentence naming the kinds otherwise. */
export function parseTrainSegments(value: unknown): SegmentKind[] {
  const kinds =
    typeof value === "string"
      ? value
          .split(",")
          .map((s) => s.trim())
          .filter((s) => s !== "")
      : value;
  if (!Array.isArray(kinds) || kinds.length === 0 || !kinds.every((k) => SEGMENT_KINDS.includes(k as SegmentKind))) {
    throw new Error(`train segments are a list of ${SEGMENT_KINDS.join(", ")} (got ${JSON.stringify(value)})`);
  }
  return [...new Set(kinds as SegmentKind[])];
}

/** A rollout's own setting (metadata `train_segments`), or null when it has none. */
export function rolloutTrainSegments(metadata: Record<string, unknown> | null | undefined): SegmentKind[] | null {
  const value = metadata?.["train_segments"];
  return value === undefined || value === null ? null : parseTrainSegments(value);
}
