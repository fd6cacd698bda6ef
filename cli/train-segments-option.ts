// `--train-segments main,sub_agent,compaction,auxiliary`, shared by serve, core and show.
import { InvalidArgumentError } from "commander";
import { parseTrainSegments } from "../trajectory/train-segments.ts";
import type { SegmentKind } from "../trajectory/types.ts";

export const TRAIN_SEGMENTS_HELP =
  "segment kinds that are trained, comma-separated: main, sub_agent, compaction, auxiliary (default main; a rollout's metadata train_segments wins)";

export function trainSegmentsOption(value: string): SegmentKind[] {
  try {
    return parseTrainSegments(value);
  } catch (error) {
    throw new InvalidArgumentError((error as Error).message);
  }
}
