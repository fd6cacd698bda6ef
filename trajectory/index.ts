// Trajectory reconstruction: a rollout's captured calls → token-level trajectories with loss masks.
export { fromCallRecord, prepareCall } from "./call-tokens.ts";
export { chatFormatOf, QWEN3_CHAT_FORMAT, type ChatFormat } from "./chat-format.ts";
export {
  describeBreak,
  formatCallTree,
  formatReconstruction,
  formatSummary,
  formatTrajectory,
  type FormatOptions,
} from "./format.ts";
export { reconstructionToJson, trajectoryToJson, type ReconstructionJson, type TrajectoryJson } from "./json.ts";
export { naiveReconstruct } from "./naive.ts";
export { reconstructRollout } from "./reconstruct.ts";
export { RolloutTree } from "./rollout-tree.ts";
export { DEFAULT_MAX_LEAVES, DEFAULT_TRAIN_SEGMENTS, trajectoryId } from "./assemble.ts";
export * from "./types.ts";
export { parseTrainSegments, rolloutTrainSegments } from "./train-segments.ts";
