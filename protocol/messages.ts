// The messages of proto/rlgate/v1/*.proto as @grpc/proto-loader hands them over (camelCase fields, bytes as
// Buffer, 64-bit integers as numbers, every field present). Keep in step with the .proto files.
import type { Agreement } from "../util/agreement.ts";

export interface SubscribeRequest {
  consumerGroup: string;
  member: string;
  maxInFlight: number;
  leaseTimeoutMs: number;
  /** Cursors the member holds unacked (kept leased to it, with their groups); absent: none. */
  held?: number[];
  /** Acks the gateway may have lost; absent: none. */
  acked?: number[];
}
export interface Heartbeat {
  atMs: number;
  /** Gateway to member: the persisted committed cursor (absent or 0 from members). */
  committedCursor?: number;
}
export type SubscribeMessage =
  | { kind?: "subscribe"; subscribe: SubscribeRequest }
  | { kind?: "ack"; ack: { cursors: number[] } }
  | { kind?: "heartbeat"; heartbeat: Heartbeat }
  | { kind?: "agreement"; agreement: AgreementMessage };

/** The figures of one trainer logprob report, sent by the core to its gateways (trajectories.proto Agreement). */
export interface AgreementMessage {
  atMs: number;
  batchId: number;
  member: string;
  /** Same fields as Consistency: "*" first, then one per harness. */
  harnesses: Consistency[];
}

export interface AddSourceRequest {
  address: string;
  consumerGroup: string;
  namespace: string;
  ttlMs: number;
  token: string;
}

export interface SourceStatus {
  address: string;
  consumerGroup: string;
  namespace: string;
  added: boolean;
  connected: boolean;
  received: number;
  removed: boolean;
}

export interface Subscribed {
  sessionId: string;
  committedCursor: number;
  maxMessageBytes: number;
  /** Held cursors the member must drop (acked, or given to another member). */
  rejected: number[];
}

export interface TokenRows {
  rows: number;
  offsets: Uint8Array;
  tokenIds: Uint8Array;
  lossMask: Uint8Array;
  logprobs: Uint8Array;
  /** MoE routing replay: [tokens, moeLayers, moeTopK] expert indexes in `routedExpertsDtype` (LE); empty: none. */
  routedExperts?: Uint8Array;
  /** "uint8" | "uint16" ("" without routing). */
  routedExpertsDtype?: string;
  moeLayers?: number;
  moeTopK?: number;
}

export interface RolloutMessage {
  cursor: number;
  rolloutId: string;
  group: string;
  task: string;
  harness: string;
  status: string;
  hasReward: boolean;
  reward: number;
  metadataJson: string;
  finishedAtMs: number;
  flagged: boolean;
  flagReasons: string[];
  oversize: boolean;
  trajectories: TokenRows;
  trajectoryIds: string[];
  segments: string[];
  trained: Uint8Array;
  /** The calls that sampled tokens of the rows (absent from older gateways). */
  calls?: CallInfo[];
  /** int32 LE per token: index into `calls`, -1 on context (empty from older gateways). */
  callIndex?: Uint8Array;
  /** The round its creator gave the rollout (control API `round`, e.g. the training step); 0: none given. */
  round: number;
}

/** One call as a trainer needs it (trajectories.proto CallInfo). Sampling fields absent: the server's defaults. */
export interface CallInfo {
  seq: number;
  policyVersion: string;
  temperature?: number;
  topP?: number;
  topK?: number;
  finishReason: string;
  /** Per-token versions when a weight update fell inside the answer (runs over its sampled tokens); empty: none. */
  versionRuns?: VersionRun[];
}

/** Tokens from `start` (among the call's sampled tokens) to the next run's start were sampled by `version`. */
export interface VersionRun {
  start: number;
  version: string;
}

export type StreamMessage =
  | { kind?: "subscribed"; subscribed: Subscribed }
  | { kind?: "rollout"; rollout: RolloutMessage }
  | { kind?: "heartbeat"; heartbeat: Heartbeat };

export interface StreamBatchesRequest {
  trainer: string;
  maxInFlight: number;
  /** "rows" | "tree": the layout of this stream's batches; "" the core's. */
  layout?: string;
}

export interface RowInfo {
  rolloutId: string;
  trajectoryId: string;
  group: string;
  task: string;
  harness: string;
  reward: number;
  segment: string;
  generation: number;
  /** The rollout's explicit round (0: its generation is by fill order). */
  round: number;
  /** The core's key of the group (part) the rollout was trained in; rows with equal keys were compared. */
  groupKey?: string;
  late: boolean;
  calls: CallInfo[];
  finishReason: string;
  policyVersion: string;
  noSignal: boolean;
  /** Current version minus the oldest version of the row's trained tokens, when its group was processed. */
  staleness?: number;
  /** Trained tokens older than current − max_staleness (kept by `--stale keep`). */
  staleTokens?: number;
}

export interface BatchMessage {
  batchId: number;
  rows: number;
  offsets: Uint8Array;
  tokenIds: Uint8Array;
  lossMask: Uint8Array;
  logprobs: Uint8Array;
  advantages: Uint8Array;
  lossWeights: Uint8Array;
  rowInfo: RowInfo[];
  estimator: string;
  normalize: string;
  lossAgg: string;
  tokens: number;
  trainedTokens: number;
  groups: number;
  createdAtMs: number;
  /** Alignment filler (received, never meaningful; the core's encoder adds it). */
  padding?: Uint8Array;
  /** int32 LE per token: index into the row's RowInfo.calls, -1 on context. */
  callIndex: Uint8Array;
  batchUnit: string;
  lossTokens: number;
  rollouts: number;
  /** MoE routing replay: per token [moeLayers, moeTopK] expert indexes in `routedExpertsDtype` (LE); empty: none. */
  routedExperts?: Uint8Array;
  routedExpertsDtype?: string;
  moeLayers?: number;
  moeTopK?: number;
  /** "rows" (or "") | "tree": what the per-token arrays are laid out by (proto/rlgate/v1/trainer.proto). */
  layout?: string;
  /** tree: int32 LE per token, the parent's index (-1 at a trie's root). */
  parents?: Uint8Array;
  /** tree: int32 LE per token, the depth in its trie (its position id). */
  positions?: Uint8Array;
  /** tree: int32 LE per token, the row whose fields (and calls) the token carries. */
  tokenRows?: Uint8Array;
  /** tree: int32 LE per row token, its tree token (rows delimited by `offsets`). */
  rowNodes?: Uint8Array;
  /** tree: int32 LE, tries + 1 entries (one trie per rollout). */
  trieOffsets?: Uint8Array;
  /** Tokens in the rows layout. */
  rowTokens?: number;
  /** tree: int32 LE per token, the end (exclusive) of its subtree. */
  subtreeEnds?: Uint8Array;
  /** The core's current policy version when the batch was packed. */
  currentVersion?: string;
  /** The largest staleness of its rows, and their stale tokens. */
  maxStaleness?: number;
  staleTokens?: number;
}

export interface AckBatchRequest {
  batchIds: number[];
}

export interface LogprobReport {
  batchId: number;
  logprobs: Uint8Array;
  ack: boolean;
  importanceCap: number;
  /** "policy" (default, "") or "ref". */
  kind: string;
}

export interface RowKl {
  row: number;
  tokens: number;
  k1: number;
  k2: number;
  k3: number;
}

/** Training–inference agreement of one harness ("*": the whole batch): util/agreement.ts's figures. */
export interface Consistency extends Agreement {
  harness: string;
}

export interface ConsistencyReport {
  batchId: number;
  harnesses: Consistency[];
  importanceWeights: Uint8Array;
  acked: boolean;
  rowKl: RowKl[];
  /** float32 LE per token: the batch's advantages with KL in the reward (the core's --kl-coef); empty without. */
  klAdvantages: Uint8Array;
}

export interface AdvantageRequest {
  batchId: number;
  rows: number;
  offsets: Uint8Array;
  lossMask: Uint8Array;
  rewards: number[];
  groupIds: number[];
  taskIds: number[];
  harnessIds: number[];
  estimator: string;
  values: Uint8Array;
  tokenRewards: Uint8Array;
  gae: GaeParams | null;
  normalize: string;
  klCoef: number;
  klKind: string;
  /** reinforce++'s discount (absent: 1). */
  gamma?: number;
  /** Over a served batch: the layout of values, token_rewards and the reply ("" the core's). */
  layout?: string;
}

/** Proto3 optional fields: absent when not given. */
export interface GaeParams {
  gamma?: number;
  lambda?: number;
  whiten?: boolean;
}

export interface AdvantageResponse {
  advantages: Uint8Array;
  returns: Uint8Array;
  lossMask: Uint8Array;
}

export interface CoreStatus {
  estimator: string;
  rolloutsReceived: number;
  rolloutsDuplicate: number;
  groupsPending: number;
  groupsDone: number;
  trajectoriesReady: number;
  batchesReady: number;
  batchesLeased: number;
  gateways: string[];
  gatewaysConnected: boolean[];
  rolloutsLate: number;
  rolloutsDropped: Record<string, number>;
  batchUnit: string;
  whitenScope: string;
  /** The core's current policy version ("" none yet) and its staleness settings (maxStaleness < 0: none). */
  currentVersion: string;
  maxStaleness: number;
  stale: string;
  staleTokensKept: number;
  staleTokensMasked: number;
}

export interface PausePolicyRequest {
  /** abort (default) | wait | keep. */
  mode: string;
  /** Seconds until each gateway resumes on its own; 0: its default. */
  timeoutS: number;
}

export interface ResumePolicyRequest {
  /** The version the updated weights serve as; "" none. */
  version: string;
}

/** One gateway's weight-update state (its GET /api/policy). */
export interface GatewayPolicy {
  url: string;
  paused: boolean;
  mode: string;
  version: string;
  pauses: number;
  holding: number;
}

export interface PolicyState {
  paused: boolean;
  currentVersion: string;
  gateways: GatewayPolicy[];
}
