// What a reconstruction engine (the prefix tree, or the naive reference) hands to `assemble`: the sequences, the
// attach decision of every call, the leaves, and a way to emit one trajectory's arrays.
import type { CallNote } from "./call-tokens.ts";
import { classifyDivergence, type DivergenceFacts } from "./classify.ts";
import type { CallShape, SegmentBook } from "./segments.ts";
import type { Break, CallAttach } from "./types.ts";
import type { ExpertDtype } from "../util/routed-experts.ts";

/** One inserted sequence: a call's prompt followed by one choice's sampled ids. Ids follow insertion order. */
export interface SeqRecord {
  id: number;
  callSeq: number;
  choiceIndex: number;
  promptLength: number;
  /** Prompt plus completion. */
  length: number;
  trusted: boolean;
  segmentId: number;
  /** The choice's logprobs (null when unknown): a sequence on a trajectory's path is credited with its own. */
  logprobs: ArrayLike<number> | null;
}

export interface TreeCall {
  callSeq: number;
  promptLength: number;
  attach: CallAttach;
  brk: Break | null;
  seqIds: number[];
}

export interface RawTrajectory {
  tokenIds: Int32Array;
  lossMask: Uint8Array;
  logprobs: Float32Array;
  /** Sequence credited with each position's sample; -1 for context. */
  attribution: Int32Array;
  /** Calls whose prompt lies on this path. */
  promptCalls: number[];
  /**
   * Routed experts (R3), when the rollout has any: [length, layers, topK] expert indexes (the last position has no
   * row: it was never a model input, and stays 0), and how many of positions [0, length − 1) had none.
   */
  routing?: { experts: Uint16Array; missing: number };
}

/** Emits trajectories in order; sampled positions trained by an earlier `trained` emission get mask 0. */
export type Emitter = (rep: number, trained: boolean) => RawTrajectory;

export interface TrajectorySource {
  readonly seqs: readonly SeqRecord[];
  readonly treeCalls: readonly TreeCall[];
  /** Every call handed over, in the tree or not. */
  readonly notes: readonly CallNote[];
  readonly segments: SegmentBook;
  /** Sequence ids ending at each leaf (identical sequences share a leaf). */
  leafGroups(): number[][];
  /** A later call has the same prompt. */
  isDead(seqId: number): boolean;
  emitter(): Emitter;
  uniqueTokens(): number;
  sampledTokens(): number;
  /** The rollout's routing (R3): the rows' shape and dtype, and what could not be kept; null when it has none. */
  routing?(): RolloutRouting | null;
}

export interface RolloutRouting {
  layers: number;
  topK: number;
  dtype: ExpertDtype;
  /** Routing the tree could not keep (a shape unlike the rollout's), per call. */
  issues: Array<{ callSeq: number; issue: string }>;
}

/** Classifies a call's divergence, puts it in a segment and writes its attach record and break. */
export function attachCall(
  callSeq: number,
  promptLength: number,
  facts: DivergenceFacts,
  seqs: readonly SeqRecord[],
  segments: SegmentBook,
  shape: CallShape,
): { attach: CallAttach; brk: Break | null } {
  const d = classifyDivergence(facts);
  const refSeq = d.ref === null ? null : seqs[d.ref]!;
  let segmentId: number;
  if (refSeq === null) segmentId = segments.open("main", null, callSeq, shape, false);
  else if (d.kind === "sub_agent" || d.kind === "compaction")
    segmentId = segments.open(
      d.kind,
      seqs[d.parent!]!.segmentId,
      callSeq,
      shape,
      d.fromSummary,
      seqs[d.parent!]!.callSeq,
    );
  else {
    segmentId = refSeq.segmentId;
    // A call past a moved context message carries on the agent's answer as much as an extension does.
    const continues = d.kind === "extend" || d.kind === "reserialization" || d.cause === "ephemeral_context";
    segments.join(segmentId, callSeq, shape, continues);
  }
  const attach: CallAttach = {
    callSeq,
    kind: d.kind,
    matchedTokens: facts.matched,
    promptTokens: promptLength,
    ref: refSeq === null ? null : { callSeq: refSeq.callSeq, choiceIndex: refSeq.choiceIndex },
    segmentId,
  };
  let brk: Break | null = null;
  if (d.kind !== "root" && d.kind !== "extend") {
    const from = seqs[d.from!]!;
    brk = {
      kind: d.kind,
      callSeq,
      at: facts.matched,
      from: { callSeq: from.callSeq, choiceIndex: from.choiceIndex },
      offsetInCompletion: d.kind === "reserialization" ? facts.matched - from.promptLength : null,
      // A compaction's `from` wrote its summary and may end before the divergence: count the branch it left.
      oldTokens: (d.kind === "compaction" ? seqs[d.ref!]! : from).length - facts.matched,
      newTokens: promptLength - facts.matched,
      ...(d.cause === null ? {} : { cause: d.cause }),
    };
  }
  return { attach, brk };
}
