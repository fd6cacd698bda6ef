// Segments: the runs of calls that belong to one agent context. A call that leaves the tree inside the system prompt
// opens a sub-agent segment; one that restarts from a summary (or a shorter history under the same system prompt)
// opens a compaction segment; every other call joins the segment of the sequence it attached to. Which segment is the
// main agent is decided at the end: one-shot side calls (title generation and the like) are auxiliary wherever they
// come in time, and main is the first thread that is not one.
import type { Segment, SegmentKind } from "./types.ts";

/** An answer longer than this is not a side call's (a title, a topic check, a yes/no). */
export const AUXILIARY_MAX_TOKENS = 1024;

/** What segments need to know of a call. */
export interface CallShape {
  /** Tools the request offered; null when unknown (the call record does not say). */
  tools: number | null;
  /** The longest of its choices' sampled ids. */
  sampledTokens: number;
}

interface Draft {
  id: number;
  proposed: SegmentKind;
  parentId: number | null;
  firstCallSeq: number;
  callSeqs: number[];
  /** A call of it continued an earlier one (extend, re-serialization). */
  continued: boolean;
  /** A compaction started from its answer (a summary found in the new thread's prompt). */
  summarized: boolean;
  /** Every call offered no tools (known) and answered briefly. */
  sideCalls: boolean;
  /** A compaction found from its summary: the call that wrote it. */
  summaryCallSeq: number | null;
}

function isSideCall(shape: CallShape): boolean {
  return shape.tools === 0 && shape.sampledTokens <= AUXILIARY_MAX_TOKENS;
}

export interface FinalSegments {
  segments: Segment[];
  /** Why the main agent cannot be told apart (null when it can). */
  mainUnclear: string | null;
  /** Calls taken out of the segment they attached to, and the segment they are in now (a summarizer's). */
  detached: Map<number, number>;
}

export class SegmentBook {
  readonly #drafts: Draft[] = [];

  /** `fromSummary`: a compaction whose parent wrote the summary it starts from, in call `summaryCallSeq`. */
  open(
    kind: SegmentKind,
    parentId: number | null,
    callSeq: number,
    shape: CallShape,
    fromSummary: boolean,
    summaryCallSeq: number | null = null,
  ): number {
    const id = this.#drafts.length;
    this.#drafts.push({
      id,
      proposed: kind,
      parentId,
      firstCallSeq: callSeq,
      callSeqs: [callSeq],
      continued: false,
      summarized: false,
      sideCalls: isSideCall(shape),
      summaryCallSeq: fromSummary ? summaryCallSeq : null,
    });
    if (kind === "compaction" && fromSummary && parentId !== null) this.#drafts[parentId]!.summarized = true;
    return id;
  }

  /** `continues`: the call carries on a sequence of the segment (not a retry, not a branch off its context). */
  join(id: number, callSeq: number, shape: CallShape, continues: boolean): void {
    const draft = this.#drafts[id]!;
    draft.callSeqs.push(callSeq);
    if (continues) draft.continued = true;
    if (!isSideCall(shape)) draft.sideCalls = false;
  }

  /**
   * Final kinds. Segments of one-shot side calls (no tools, a short answer, nothing continues them) are auxiliary when
   * some other thread is an agent, and so is a summarizer: a one-shot thread of its own whose answer a compaction
   * starts from. Main is the first other thread; threads opened off an auxiliary call (a compaction off its
   * summarizer) hang under main. A proposed compaction of any other thread is a sub-agent when that thread is one (a
   * sub-agent's restart or a second instance of it), or when it still gets calls after the compaction started: the old
   * history went on, so this was a fork, not a compaction.
   */
  finalize(trainSegments: readonly SegmentKind[]): FinalSegments {
    const drafts = this.#drafts;
    const kinds: SegmentKind[] = [];
    const parents: Array<number | null> = drafts.map((d) => d.parentId);
    const side = drafts.map((d) => d.proposed !== "compaction" && !d.continued && (d.sideCalls || d.summarized));
    // A thread opened off a side call is no sub-agent for this rule: the agent itself, when a title call came first.
    const subAgent = (id: number) => {
      const parentId = drafts[id]!.parentId;
      return kinds[id] === "sub_agent" && !(parentId !== null && side[parentId]);
    };
    for (const draft of drafts) {
      let kind = draft.proposed;
      if (kind === "compaction" && draft.parentId !== null && !side[draft.parentId]) {
        const parent = drafts[draft.parentId]!;
        if (subAgent(draft.parentId) || parent.callSeqs.some((seq) => seq > draft.firstCallSeq)) kind = "sub_agent";
      }
      kinds.push(kind);
    }
    let mainUnclear: string | null = null;
    const agents = drafts.filter((_, i) => !side[i]);
    if (agents.length === 0) {
      if (drafts.length > 1) mainUnclear = `no thread is an agent: ${drafts.length} one-shot calls without tools`;
    } else {
      const main = agents.find((d) => kinds[d.id] !== "compaction") ?? agents[0]!;
      drafts.forEach((d, i) => {
        if (side[i]) kinds[i] = "auxiliary";
      });
      if (kinds[main.id] !== "main") parents[main.id] = null;
      kinds[main.id] = "main";
      drafts.forEach((d, i) => {
        if (i !== main.id && d.parentId !== null && side[d.parentId]) parents[i] = main.id;
      });
    }
    const segments: Segment[] = drafts.map((draft, i) => ({
      id: draft.id,
      kind: kinds[i]!,
      parentId: parents[i]!,
      firstCallSeq: draft.firstCallSeq,
      callSeqs: [...draft.callSeqs].sort((a, b) => a - b),
      trained: trainSegments.includes(kinds[i]!),
    }));
    return { segments, mainUnclear, detached: detachSummarizers(drafts, segments, trainSegments) };
  }
}

/**
 * A summarizing call that extends its agent's own history (Claude Code and Codex append the summary request to the
 * conversation) is that thread's last call and writes the summary a compaction starts from: it is the harness's
 * bookkeeping, not the agent's work, so it becomes an auxiliary segment of its own, and the agent's trajectory ends
 * where its work did. Summarizers of a thread of their own are auxiliary already (`finalize`).
 */
function detachSummarizers(
  drafts: readonly Draft[],
  segments: Segment[],
  trainSegments: readonly SegmentKind[],
): Map<number, number> {
  const detached = new Map<number, number>();
  for (const draft of drafts) {
    const summary = draft.summaryCallSeq;
    if (summary === null || segments[draft.id]!.kind !== "compaction" || detached.has(summary)) continue;
    const owner = segments.find((s) => s.callSeqs.includes(summary));
    if (!owner || owner.kind === "auxiliary" || owner.firstCallSeq === summary) continue;
    if (owner.callSeqs[owner.callSeqs.length - 1] !== summary) continue;
    owner.callSeqs = owner.callSeqs.filter((seq) => seq !== summary);
    const id = segments.length;
    segments.push({
      id,
      kind: "auxiliary",
      parentId: owner.id,
      firstCallSeq: summary,
      callSeqs: [summary],
      trained: trainSegments.includes("auxiliary"),
    });
    detached.set(summary, id);
  }
  return detached;
}
