// The messages of proto/rlgate/v1/*.proto as @grpc/proto-loader hands them over (camelCase fields, bytes as
// Buffer, 64-bit integers as numbers, every field present). Keep in step with the .proto files.

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
  | { kind?: "heartbeat"; heartbeat: Heartbeat };

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
}

export type StreamMessage =
  | { kind?: "subscribed"; subscribed: Subscribed }
  | { kind?: "rollout"; rollout: RolloutMessage }
  | { kind?: "heartbeat"; heartbeat: Heartbeat };

export interface StreamBatchesRequest {
  trainer: string;
  maxInFlight: number;
}

export interface RowInfo {
  rolloutId: string;
  trajectoryId: string;
  group: string;
  task: string;
  harness: string;
  reward: number;
  segment: string;
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
}

export interface AckBatchRequest {
  batchIds: number[];
}

export interface LogprobReport {
  batchId: number;
  logprobs: Uint8Array;
  ack: boolean;
  importanceCap: number;
}

export interface Consistency {
  harness: string;
  tokens: number;
  pearson: number;
  k3Kl: number;
  absDiffMean: number;
  absDiffP50: number;
  absDiffP99: number;
  absDiffMax: number;
}

export interface ConsistencyReport {
  batchId: number;
  harnesses: Consistency[];
  importanceWeights: Uint8Array;
  acked: boolean;
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
}

export interface GaeParams {
  gamma: number;
  lambda: number;
  whiten: boolean;
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
}
