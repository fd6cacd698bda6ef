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
}

function isSideCall(shape: CallShape): boolean {
  return shape.tools === 0 && shape.sampledTokens <= AUXILIARY_MAX_TOKENS;
}

export interface FinalSegments {
  segments: Segment[];
  /** Why the main agent cannot be told apart (null when it can). */
  mainUnclear: string | null;
}

export class SegmentBook {
  readonly #drafts: Draft[] = [];

  /** `fromSummary`: a compaction whose parent wrote the summary it starts from. */
  open(kind: SegmentKind, parentId: number | null, callSeq: number, shape: CallShape, fromSummary: boolean): number {
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
    for (const draft of drafts) {
      let kind = draft.proposed;
      if (kind === "compaction" && draft.parentId !== null && !side[draft.parentId]) {
        const parent = drafts[draft.parentId]!;
        if (kinds[draft.parentId] === "sub_agent" || parent.callSeqs.some((seq) => seq > draft.firstCallSeq))
          kind = "sub_agent";
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
    const segments = drafts.map((draft, i) => ({
      id: draft.id,
      kind: kinds[i]!,
      parentId: parents[i]!,
      firstCallSeq: draft.firstCallSeq,
      callSeqs: [...draft.callSeqs].sort((a, b) => a - b),
      trained: trainSegments.includes(kinds[i]!),
    }));
    return { segments, mainUnclear };
  }
}
