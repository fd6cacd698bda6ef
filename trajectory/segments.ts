// Segments: the runs of calls that belong to one agent context. The first call opens the main segment; a call that
// leaves the tree inside the system prompt opens a sub-agent segment; one that restarts a shorter history under the
// same system prompt opens a compaction segment. Every other call joins the segment of the sequence it attached to.
import type { Segment, SegmentKind } from "./types.ts";

interface Draft {
  id: number;
  proposed: SegmentKind;
  parentId: number | null;
  firstCallSeq: number;
  callSeqs: number[];
}

export class SegmentBook {
  readonly #drafts: Draft[] = [];

  open(kind: SegmentKind, parentId: number | null, callSeq: number): number {
    const id = this.#drafts.length;
    this.#drafts.push({ id, proposed: kind, parentId, firstCallSeq: callSeq, callSeqs: [callSeq] });
    return id;
  }

  join(id: number, callSeq: number): void {
    this.#drafts[id]!.callSeqs.push(callSeq);
  }

  /**
   * Final kinds. A proposed compaction is a sub-agent when its parent is one (a sub-agent's restart or a second
   * instance of it), or when the parent segment still gets calls after it started: the old history went on, so this
   * was a fork under the same system prompt, not a compaction.
   */
  finalize(trainSegments: readonly SegmentKind[]): Segment[] {
    const out: Segment[] = [];
    for (const draft of this.#drafts) {
      let kind = draft.proposed;
      if (kind === "compaction" && draft.parentId !== null) {
        const parent = this.#drafts[draft.parentId]!;
        const parentKind = out[draft.parentId]!.kind;
        if (parentKind === "sub_agent" || parent.callSeqs.some((seq) => seq > draft.firstCallSeq)) kind = "sub_agent";
      }
      out.push({
        id: draft.id,
        kind,
        parentId: draft.parentId,
        firstCallSeq: draft.firstCallSeq,
        callSeqs: [...draft.callSeqs].sort((a, b) => a - b),
        trained: trainSegments.includes(kind),
      });
    }
    return out;
  }
}
