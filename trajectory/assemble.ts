// From an engine's leaves and arrays to the reconstruction record: which leaves are dead, which trajectories are
// trained, sampled spans, breaks per trajectory, statistics and flags. Shared by the prefix tree and the naive
// reference so that both are judged on the same rules.
import type { CallNote } from "./call-tokens.ts";
import type { RawTrajectory, RolloutRouting, TrajectorySource } from "./source.ts";
import {
  BREAK_KINDS,
  type AttachKind,
  type Break,
  type BreakKind,
  type CallSummary,
  type ChoiceFate,
  type Reconstruction,
  type ReconstructOptions,
  type RolloutFlags,
  type SampledSpan,
  type Segment,
  type SegmentKind,
  type Trajectory,
  type TrajectoryRouting,
} from "./types.ts";

export const DEFAULT_TRAIN_SEGMENTS: readonly SegmentKind[] = ["main"];
export const DEFAULT_MAX_LEAVES = 64;

export function trajectoryId(rolloutId: string, callSeq: number, choiceIndex: number): string {
  return `${rolloutId}:${callSeq}:${choiceIndex}`;
}

export function assemble(src: TrajectorySource, options: ReconstructOptions): Reconstruction {
  const { rolloutId } = options;
  const reward = options.reward ?? null;
  const { segments, mainUnclear, detached } = src.segments.finalize(options.trainSegments ?? DEFAULT_TRAIN_SEGMENTS);
  const seqs = src.seqs;
  // A detached summarizer's call is in its own segment now (segments.ts `detachSummarizers`).
  const segmentIdOf = (callSeq: number, attached: number): number => detached.get(callSeq) ?? attached;
  const segmentOfSeq = (id: number): Segment => segments[segmentIdOf(seqs[id]!.callSeq, seqs[id]!.segmentId)]!;

  // The call that opened a segment is named after the segment's final kind: a proposed compaction that turned out to
  // be a fork is the sub-agent it is; the main agent's first call is its root; a side call is auxiliary (no break).
  const breakOf = new Map<number, Break>();
  const attachOf = new Map<number, (typeof src.treeCalls)[number]["attach"]>();
  for (const call of src.treeCalls) {
    const segmentId = segmentIdOf(call.callSeq, call.attach.segmentId);
    const segment = segments[segmentId]!;
    const kind = segment.firstCallSeq === call.callSeq ? openingKind(segment) : call.attach.kind;
    attachOf.set(call.callSeq, { ...call.attach, kind, segmentId });
    if (call.brk !== null && kind !== "root" && kind !== "auxiliary")
      breakOf.set(call.callSeq, { ...call.brk, kind: kind as BreakKind });
  }
  const breaks = [...breakOf.values()].sort((a, b) => a.callSeq - b.callSeq);

  // Leaves: dead when every sequence ending there was superseded by a later call with the same prompt.
  const fate = new Map<number, ChoiceFate>();
  const trajectoryOfSeq = new Map<number, string>();
  const live: Array<{ rep: number; members: number[] }> = [];
  let deadLeaves = 0;
  const groups = [...src.leafGroups(), ...detachedLeaves(src, detached)];
  for (const members of groups) {
    const alive = members.filter((id) => !src.isDead(id));
    for (const id of members) fate.set(id, alive.includes(id) ? "leaf" : "dead");
    if (alive.length === 0) deadLeaves++;
    else live.push({ rep: alive.reduce((a, b) => Math.max(a, b)), members });
  }
  live.sort((a, b) => a.rep - b.rep);

  // Trained trajectories take their tokens first; untrained ones then mark what they would add, so a consumer that
  // trains more segment kinds than this reconstruction still trains each sampled token once.
  const emit = src.emitter();
  const routing = src.routing?.() ?? null;
  const raws = new Map<number, RawTrajectory>();
  for (const pass of [true, false]) {
    for (const { rep } of live) if (segmentOfSeq(rep).trained === pass) raws.set(rep, emit(rep, true));
  }
  const trajectories: Trajectory[] = [];
  for (const { rep, members } of live) {
    const leafSeq = seqs[rep]!;
    const segment = segmentOfSeq(rep);
    const raw = raws.get(rep)!;
    const id = trajectoryId(rolloutId, leafSeq.callSeq, leafSeq.choiceIndex);
    for (const m of members) trajectoryOfSeq.set(m, id);
    const spans: SampledSpan[] = [];
    const { attribution, lossMask } = raw;
    for (let i = 0; i < attribution.length;) {
      const a = attribution[i]!;
      if (a < 0) {
        i++;
        continue;
      }
      const seq = seqs[a]!;
      const kind = spanKind(seq.trusted, lossMask[i]!, segment.trained);
      let j = i + 1;
      while (
        j < attribution.length &&
        attribution[j] === a &&
        spanKind(seq.trusted, lossMask[j]!, segment.trained) === kind
      )
        j++;
      spans.push({ start: i, end: j, callSeq: seq.callSeq, choiceIndex: seq.choiceIndex, kind });
      i = j;
    }
    const onPathBreaks = [...new Set(raw.promptCalls)]
      .sort((a, b) => a - b)
      .flatMap((callSeq) => (breakOf.has(callSeq) ? [breakOf.get(callSeq)!] : []));
    const routedExperts = routingOf(routing, raw.routing);
    trajectories.push({
      trajectoryId: id,
      rolloutId,
      segment: segment.kind,
      segmentId: segment.id,
      trained: segment.trained,
      leaf: { callSeq: leafSeq.callSeq, choiceIndex: leafSeq.choiceIndex },
      tokenIds: raw.tokenIds,
      lossMask: raw.lossMask,
      logprobs: raw.logprobs,
      spans,
      reward,
      breaks: onPathBreaks,
      ...(routedExperts ? { routedExperts } : {}),
    });
  }

  // Calls, in seq order, with the fate of each choice.
  const seqsOfCall = new Map<number, number[]>();
  for (const call of src.treeCalls) seqsOfCall.set(call.callSeq, call.seqIds);
  const calls: CallSummary[] = [...src.notes]
    .sort((a, b) => a.callSeq - b.callSeq)
    .map((note) => {
      const ids = seqsOfCall.get(note.callSeq) ?? [];
      return {
        callSeq: note.callSeq,
        status: note.status,
        tokenSource: note.tokenSource,
        policyVersion: note.policyVersion,
        ...(note.policyVersions?.length ? { policyVersions: note.policyVersions } : {}),
        sampling: note.sampling,
        attach: attachOf.get(note.callSeq) ?? null,
        choices: note.choices.map((choice) => {
          const id = ids.find((s) => seqs[s]!.choiceIndex === choice.index);
          return {
            index: choice.index,
            sampledTokens: choice.sampledTokens,
            finishReason: choice.finishReason,
            fate: id === undefined ? "not_in_tree" : (fate.get(id) ?? "inner"),
            trajectoryId: id === undefined ? null : (trajectoryOfSeq.get(id) ?? null),
          };
        }),
      };
    });

  const retained = trajectories.filter((t) => t.trained);
  const uniqueTokens = src.uniqueTokens();
  const trajectoryTokens = retained.reduce((n, t) => n + t.tokenIds.length, 0);
  let trainedTokens = 0;
  for (const t of retained) for (const m of t.lossMask) trainedTokens += m;
  const breakCounts = Object.fromEntries(BREAK_KINDS.map((k) => [k, 0])) as Record<BreakKind, number>;
  for (const b of breaks) breakCounts[b.kind]++;

  const stats = {
    calls: src.notes.length,
    treeCalls: src.treeCalls.length,
    leaves: groups.length,
    deadLeaves,
    retainedTrajectories: retained.length,
    untrainedTrajectories: trajectories.length - retained.length,
    breaks: breakCounts,
    uniqueTokens,
    sampledTokens: src.sampledTokens(),
    trainedTokens,
    trajectoryTokens,
    amplification: uniqueTokens === 0 ? 0 : trajectoryTokens / uniqueTokens,
  };
  // A call whose trailing context the next call dropped stays a leaf: the harness's pattern, not a defect.
  const moved = new Set(
    breaks
      .filter((b) => b.cause === "ephemeral_context" && b.from)
      .map((b) => `${b.from!.callSeq}:${b.from!.choiceIndex}`),
  );
  const movedLeaves = trajectories.filter((t) => moved.has(`${t.leaf.callSeq}:${t.leaf.choiceIndex}`)).length;
  const flags = rolloutFlags(src, trajectories.length, options, mainUnclear, movedLeaves);
  routingFlags(flags, src, routing, trajectories);
  return { rolloutId, trajectories, calls, segments, breaks, stats, flags };
}

/**
 * A detached summarizer that extended its agent's last sequence leaves that sequence without a leaf: it is one now, so
 * the agent's trajectory ends where its work did.
 */
function detachedLeaves(src: TrajectorySource, detached: ReadonlyMap<number, number>): number[][] {
  const out: number[][] = [];
  for (const call of src.treeCalls) {
    if (!detached.has(call.callSeq) || call.attach.kind !== "extend" || call.attach.ref === null) continue;
    const { callSeq, choiceIndex } = call.attach.ref;
    const id = src.seqs.findIndex((s) => s.callSeq === callSeq && s.choiceIndex === choiceIndex);
    if (id >= 0) out.push([id]);
  }
  return out;
}

function routingOf(routing: RolloutRouting | null, raw: RawTrajectory["routing"]): TrajectoryRouting | null {
  if (routing === null || raw === undefined) return null;
  const { experts, missing } = raw;
  const data =
    routing.dtype === "uint8" ? Uint8Array.from(experts) : new Uint8Array(experts.buffer, 0, experts.byteLength);
  return { layers: routing.layers, topK: routing.topK, dtype: routing.dtype, data, missing };
}

/** Routing that could not be kept, and trained trajectories with positions lacking it, flag the rollout. */
function routingFlags(
  flags: RolloutFlags,
  src: TrajectorySource,
  routing: RolloutRouting | null,
  trajectories: readonly Trajectory[],
): void {
  const issues = src.notes
    .filter((note) => note.routingIssue && !note.failed)
    .map((note) => ({ callSeq: note.callSeq, issue: note.routingIssue! }));
  issues.push(...(routing?.issues ?? []));
  issues.sort((a, b) => a.callSeq - b.callSeq);
  const missing = trajectories
    .filter((t) => t.trained && t.routedExperts && t.routedExperts.missing > 0)
    .map((t) => ({ trajectoryId: t.trajectoryId, positions: t.routedExperts!.missing }));
  if (issues.length === 0 && missing.length === 0 && routing === null) return;
  flags.routingIssues = issues;
  flags.routingMissing = missing;
  for (const { callSeq, issue } of issues) flags.reasons.push(`call ${callSeq}: routed experts not kept: ${issue}`);
  for (const { trajectoryId, positions } of missing)
    flags.reasons.push(`${trajectoryId}: no routed experts for ${positions} token(s)`);
  flags.flagged = flags.reasons.length > 0;
}

function spanKind(trusted: boolean, mask: number, segmentTrained: boolean): SampledSpan["kind"] {
  if (!trusted) return "untrusted";
  if (mask === 0) return "shared";
  return segmentTrained ? "trained" : "untrained";
}

function openingKind(segment: Segment): AttachKind {
  return segment.kind === "main" ? "root" : segment.kind;
}

function rolloutFlags(
  src: TrajectorySource,
  liveLeaves: number,
  options: ReconstructOptions,
  mainUnclear: string | null,
  movedLeaves: number,
): RolloutFlags {
  const maxLeaves = options.maxLeaves ?? DEFAULT_MAX_LEAVES;
  const seqOf = (pred: (note: CallNote) => boolean): number[] =>
    src.notes
      .filter(pred)
      .map((note) => note.callSeq)
      .sort((a, b) => a - b);
  const flags: RolloutFlags = {
    flagged: false,
    mainUnclear,
    reasons: [],
    maxLeaves,
    tooManyLeaves: liveLeaves - movedLeaves > maxLeaves,
    missingTokenIds: seqOf((p) => p.missingTokenIds),
    retokenized: seqOf((p) => p.retokenized),
    missingLogprobs: seqOf((p) => p.missingLogprobs),
    failedCalls: seqOf((p) => p.failed),
    tokenIssues: [...src.notes]
      .filter((note) => note.tokenIssue !== null && !note.failed)
      .sort((a, b) => a.callSeq - b.callSeq)
      .map((note) => ({ callSeq: note.callSeq, issue: note.tokenIssue! })),
  };
  if (movedLeaves > 0) flags.ephemeralContextLeaves = movedLeaves;
  if (flags.tooManyLeaves)
    flags.reasons.push(
      movedLeaves > 0
        ? `${liveLeaves - movedLeaves} leaves > ${maxLeaves} (besides ${movedLeaves} left by ephemeral_context breaks)`
        : `${liveLeaves} leaves > ${maxLeaves}`,
    );
  if (flags.missingTokenIds.length > 0) flags.reasons.push(`no token ids: calls ${flags.missingTokenIds.join(", ")}`);
  for (const { callSeq, issue } of flags.tokenIssues) flags.reasons.push(`call ${callSeq}: ${issue}`);
  if (flags.retokenized.length > 0) flags.reasons.push(`retokenized ids: calls ${flags.retokenized.join(", ")}`);
  if (flags.missingLogprobs.length > 0) flags.reasons.push(`no logprobs: calls ${flags.missingLogprobs.join(", ")}`);
  if (mainUnclear !== null) flags.reasons.push(`main agent unclear: ${mainUnclear}`);
  flags.flagged = flags.reasons.length > 0;
  return flags;
}
