// The shapes of trajectory reconstruction: what goes in (the tokens of each call), what comes out (trajectories,
// the attach event of every call, segments, statistics and flags).
import type { CallTokens, ChoiceTokens, TokenIds } from "../store/call-tokens.ts";
import type { CallStatus, SamplingParams, TokenSource } from "../store/records.ts";
import type { ChatFormat } from "./chat-format.ts";
import type { ExpertDtype } from "../util/routed-experts.ts";

export type { CallTokens, ChoiceTokens, TokenIds };

/**
 * - `main`: the agent working on the task (not merely the first call).
 * - `sub_agent`: another agent context (its own system prompt), or a fork of one.
 * - `compaction`: a thread restarted from a summary an earlier call produced.
 * - `auxiliary`: one-shot side calls (title generation and the like: no tools, a short answer, nothing continues them).
 */
export type SegmentKind = "main" | "sub_agent" | "compaction" | "auxiliary";
export const SEGMENT_KINDS: readonly SegmentKind[] = ["main", "sub_agent", "compaction", "auxiliary"];

/**
 * How a call's prompt attached to the tree.
 * - `root`: first call of the rollout with token ids.
 * - `extend`: the prompt continues an earlier sequence (prompt + completion) exactly.
 * - `retry`: the prompt is identical to an earlier call's (retry, regeneration); the earlier leaf is dead.
 * - `reserialization`: the prompt left the tree inside an earlier call's sampled tokens, or in the markup of the turn
 *   such tokens follow (history re-rendered).
 * - `sub_agent`: the prompt left the tree inside the system prompt (another agent).
 * - `compaction`: a new thread that starts from a summary an earlier call produced, or under the same system prompt
 *   with fewer turns than the history it left.
 * - `auxiliary`: the call of a one-shot side segment (no break: it continues nothing).
 * - `branch`: any other departure (history edited without shortening, prompt ending inside an earlier sequence).
 * The first call of the main agent is `root` even when an auxiliary call came before it.
 */
export type AttachKind =
  "root" | "extend" | "retry" | "reserialization" | "sub_agent" | "compaction" | "auxiliary" | "branch";
export type BreakKind = Exclude<AttachKind, "root" | "extend" | "auxiliary">;
export const BREAK_KINDS: readonly BreakKind[] = ["reserialization", "retry", "sub_agent", "compaction", "branch"];

export interface SequenceRef {
  callSeq: number;
  choiceIndex: number;
}

/** Where and how a call's prompt attached, decided when the call is added. */
export interface CallAttach {
  callSeq: number;
  kind: AttachKind;
  /** Length of the prompt's deepest match in the tree (the divergence depth). */
  matchedTokens: number;
  promptTokens: number;
  /**
   * An earlier sequence that holds the first `matchedTokens` tokens of this prompt: the storage reference
   * (prompt = ref[0, matchedTokens) ++ new tokens). Null for the root call.
   */
  ref: SequenceRef | null;
  segmentId: number;
}

/**
 * Why a break happened, where its ids tell (thread-rules.ts `breakCause`):
 * - `reasoning_dropped`: a re-serialization at the `<think>` of an earlier turn: the template no longer renders its
 *   reasoning (Qwen3 drops the reasoning of turns before the last user message; a harness may drop it too).
 * - `context_changed`: a branch in context the harness wrote (a user or tool message, an environment block) that it
 *   changed between calls, under the same system prompt and with no fewer turns: the old and the new context are
 *   both what the model saw, so each is a trajectory of its own.
 * - `ephemeral_context`: a branch where the old prompt ended with context the harness put last (one or more turns of
 *   other roles than the model's before the generation prompt: OpenClaw's internal-context user message) and the new
 *   prompt holds the model's turn in its place: the harness moves that message on every call. Each call is what the
 *   model saw, so each is a trajectory of its own, in the agent's segment; expected, not counted against `maxLeaves`.
 */
export type BreakCause = "reasoning_dropped" | "context_changed" | "ephemeral_context";
export const BREAK_CAUSES: readonly BreakCause[] = ["reasoning_dropped", "context_changed", "ephemeral_context"];

/** A divergence met while attaching a call (every attach kind but root and extend). */
export interface Break {
  kind: BreakKind;
  /** The call whose prompt diverged. */
  callSeq: number;
  /** Token position of the divergence (= matched tokens). */
  at: number;
  /** The earlier sequence it diverged from: the owner of the sampled span for reserialization, else the latest one. */
  from: SequenceRef | null;
  /**
   * For reserialization: the divergence's offset into `from`'s sampled tokens; negative when it falls in the markup
   * before them (the generation prompt of that turn).
   */
  offsetInCompletion: number | null;
  /** Tokens of `from`'s sequence after the divergence (for a retry: its whole completion). */
  oldTokens: number;
  /** Tokens of the new prompt after the divergence. */
  newTokens: number;
  /** Why, where the ids tell; absent when they do not. */
  cause?: BreakCause;
}

export interface Segment {
  id: number;
  kind: SegmentKind;
  parentId: number | null;
  firstCallSeq: number;
  callSeqs: number[];
  /** Whether trajectories ending in this segment are trained (kind is in `trainSegments`). */
  trained: boolean;
}

/** A run of sampled tokens in a trajectory; positions not covered by a span are context. */
export interface SampledSpan {
  start: number;
  end: number;
  callSeq: number;
  choiceIndex: number;
  /** "trained": mask 1 here. "shared": sampled, trained in another trajectory. "untrained": this trajectory's own
   *  sampled tokens, in a segment that is not trained. "untrusted": the call's ids were retokenized, never trained. */
  kind: "trained" | "shared" | "untrained" | "untrusted";
}

export interface Trajectory {
  /** `${rolloutId}:${callSeq}:${choiceIndex}` of the leaf sequence. */
  trajectoryId: string;
  rolloutId: string;
  segment: SegmentKind;
  segmentId: number;
  /**
   * False when the segment's kind is not trained. Its loss mask still marks the tokens it would train (those no
   * trained trajectory trains), so a consumer that trains more kinds (an RL core's --train-segments) can.
   */
  trained: boolean;
  leaf: SequenceRef;
  tokenIds: Int32Array;
  /** 1 where the token is trained (each sampled token in one trajectory: trained segments first). */
  lossMask: Uint8Array;
  /** Logprob of each sampled token (NaN where the upstream sent none); 0 for context and untrusted tokens. */
  logprobs: Float32Array;
  spans: SampledSpan[];
  reward: number | null;
  /** Breaks of the calls whose prompts lie on this trajectory's path. */
  breaks: Break[];
  /** Routed experts of its tokens (MoE routing replay), when the rollout's calls carried them. */
  routedExperts?: TrajectoryRouting;
}

/**
 * A trajectory's routed experts, aligned with its tokens: [tokens, layers, topK] expert indexes, little-endian
 * `dtype`. Row i is the routing of token i as a model input (prompt tokens included: their prefill routed them). The
 * last token was never an input and its row is 0: a trainer replaying routing for `tokens[:-1]` (the [len − 1, layers,
 * topK] that SGLang, vLLM and slime use) takes rows [0, len − 1).
 */
export interface TrajectoryRouting {
  layers: number;
  topK: number;
  dtype: ExpertDtype;
  data: Uint8Array;
  /** Positions of [0, len − 1) whose routing no call sent (rows of 0): the rollout is flagged when any. */
  missing: number;
}

export type ChoiceFate = "leaf" | "dead" | "inner" | "not_in_tree";

export interface CallSummary {
  callSeq: number;
  status: CallStatus;
  tokenSource: TokenSource;
  /** The policy version that served the call (header or rollout), null when none was given. */
  policyVersion: string | null;
  /** The version of each sampled token as runs, present when a weight update fell inside the answer. */
  policyVersions?: Array<{ start: number; version: string | null }>;
  /** Sampling parameters of the forwarded request. */
  sampling: SamplingParams | null;
  /** Null when the call added nothing to the tree (failed, or no token ids). */
  attach: CallAttach | null;
  choices: Array<{
    index: number;
    sampledTokens: number;
    finishReason: string | null;
    fate: ChoiceFate;
    trajectoryId: string | null;
  }>;
}

export interface RolloutStats {
  calls: number;
  /** Calls whose tokens are in the tree. */
  treeCalls: number;
  leaves: number;
  deadLeaves: number;
  /** Non-dead leaves in trained segments: the trajectories sent to training. */
  retainedTrajectories: number;
  /** Non-dead leaves in segments that are not trained (labelled, mask all zero). */
  untrainedTrajectories: number;
  breaks: Record<BreakKind, number>;
  /** Positions in the tree. */
  uniqueTokens: number;
  /** Positions sampled by calls whose ids came from the upstream. */
  sampledTokens: number;
  trainedTokens: number;
  /** Tokens of all retained trajectories. */
  trajectoryTokens: number;
  /** trajectoryTokens / uniqueTokens. */
  amplification: number;
}

export interface RolloutFlags {
  /** True when the rollout must not be used silently (too many leaves, or token ids/logprobs missing). */
  flagged: boolean;
  reasons: string[];
  maxLeaves: number;
  tooManyLeaves: boolean;
  /** Calls (seq) whose upstream gave no token ids, or ids the gateway judged wrong (tokenSource "missing"). */
  missingTokenIds: number[];
  /** The gateway's reason for each call whose ids are not trusted. */
  tokenIssues: Array<{ callSeq: number; issue: string }>;
  /** Calls whose token ids were retokenized by rlgate (kept as context, never trained). */
  retokenized: number[];
  /** Trusted calls with sampled tokens but no logprobs (their logprobs are NaN). */
  missingLogprobs: number[];
  /** Calls that did not end ok (not trained; listed, not flagged: a failed call that was retried is normal). */
  failedCalls: number[];
  /** Why the main agent could not be told apart from side calls (null when it could). */
  mainUnclear: string | null;
  /**
   * Live leaves that an `ephemeral_context` break left behind (the calls whose trailing context the next call dropped):
   * expected of such a harness, so not counted against `maxLeaves`. Absent when none.
   */
  ephemeralContextLeaves?: number;
  /**
   * MoE routing replay: calls whose routed experts could not be kept (the gateway's `routingIssue`, or a shape unlike
   * the rollout's), and trained trajectories with positions no call sent routing for. Absent on rollouts without
   * routing. Either flags the rollout.
   */
  routingIssues?: Array<{ callSeq: number; issue: string }>;
  routingMissing?: Array<{ trajectoryId: string; positions: number }>;
}

export interface ReconstructOptions {
  rolloutId: string;
  reward?: number | null;
  /** Segment kinds whose trajectories are trained. Default: main only. */
  trainSegments?: readonly SegmentKind[];
  /** Flag the rollout above this many non-dead leaves. Default 64. */
  maxLeaves?: number;
  /** Special ids that delimit turns. Default: Qwen3. */
  chatFormat?: ChatFormat;
}

export interface Reconstruction {
  rolloutId: string;
  /** Every non-dead leaf, in the order of its leaf call (seq, choice); `trained` says which go to training. */
  trajectories: Trajectory[];
  calls: CallSummary[];
  segments: Segment[];
  breaks: Break[];
  stats: RolloutStats;
  flags: RolloutFlags;
}
