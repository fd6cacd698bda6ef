// The RL core's public surface (the core itself: core.ts).
export {
  Core,
  startCore,
  DEFAULT_CORE_PORT,
  DEFAULT_GROUP_TIMEOUT_MS,
  DEFAULT_TOKEN_BUDGET,
  type CoreOptions,
} from "./core.ts";
export { CORE_ESTIMATORS, type CoreEstimator, type WhitenScope } from "./estimator-settings.ts";
export { BATCH_UNITS, type BatchUnit } from "./batch-packer.ts";
export {
  BATCH_LAYOUTS,
  batchTreeView,
  rowsToTree,
  treeBatch,
  treeToRows,
  treeView,
  type BatchLayout,
  type TreeView,
} from "./tree-layout.ts";
export { STALE_MODES, type StaleMode } from "./staleness.ts";
