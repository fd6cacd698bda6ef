// The rules that name a divergence. Both the prefix tree and the naive reference gather the same facts about where a
// prompt left the existing sequences; this one function decides what that means.
import { breakCause, type MarkupBreak } from "./thread-rules.ts";
import type { ChatFormat } from "./chat-format.ts";
import type { AttachKind, BreakCause } from "./types.ts";

export interface DivergenceFacts {
  /** No sequence in the tree yet. */
  empty: boolean;
  promptLength: number;
  /** Depth of the prompt's deepest match. */
  matched: number;
  /** Latest earlier sequence whose prompt equals this prompt. */
  identical: number | null;
  /** Latest earlier sequence that equals the matched prefix (the prompt continues it). */
  extended: number | null;
  /** Latest earlier sequence that goes on past the divergence (the branch the prompt left). */
  oldBranch: number | null;
  /** Sampler of the old branch's token at the divergence, if that token was sampled. */
  oldOwner: number | null;
  /** The old branch's token at the divergence (null: none, the prompt went past its end). */
  oldToken: number | null;
  format: ChatFormat;
  /** Whether the prompt and the old branch differ in their system prompts (see chat-format.ts). */
  inSystemPrompt(): boolean;
  /** Whether the prompt has fewer turns than the prompt of `oldBranch`'s call. */
  fewerTurns(): boolean;
  /**
   * The sequence whose sampled completion follows the divergence in the same turn, when the divergence falls in that
   * turn's markup (generation prompt, empty think block): see thread-rules.ts.
   */
  markupOwner(): MarkupBreak | null;
  /** The latest earlier sequence whose answer's content the prompt takes up (a summary): see thread-rules.ts. */
  summarySource(): number | null;
  /** Whether the old branch's trailing context was dropped and the model's turn put in its place: see thread-rules.ts. */
  movedContext(): boolean;
}

export interface Divergence {
  /** Auxiliary is decided per segment, at the end (segments.ts). */
  kind: Exclude<AttachKind, "auxiliary">;
  /** Sequence holding the matched prefix: storage reference and the segment the call inherits. */
  ref: number | null;
  /** Sequence reported in the break. */
  from: number | null;
  /** Sequence whose segment is the parent of a new segment (sub-agent, compaction). */
  parent: number | null;
  /** A compaction found from the summary it starts from (`parent` wrote it). */
  fromSummary: boolean;
  /** Why, where the ids tell (re-serializations and branches). */
  cause: BreakCause | null;
}

function at(
  kind: Divergence["kind"],
  ref: number | null,
  from: number | null,
  parent = ref,
  fromSummary = false,
  cause: BreakCause | null = null,
): Divergence {
  return { kind, ref, from, parent, fromSummary, cause };
}

export function classifyDivergence(f: DivergenceFacts): Divergence {
  if (f.empty) return at("root", null, null);
  if (f.identical !== null) return at("retry", f.identical, f.identical);
  if (f.extended !== null) return at("extend", f.extended, f.extended);
  const old = f.oldBranch;
  if (old === null) throw new Error("divergence without an old branch");
  // The prompt ends inside an earlier sequence (e.g. a continuation prefilled from an earlier completion).
  if (f.matched === f.promptLength) return at("branch", old, old);
  const cause = (contextual: boolean) => breakCause(f.oldToken, f.format, contextual);
  if (f.oldOwner !== null) return at("reserialization", old, f.oldOwner, old, false, cause(false));
  // Parting in the markup of a turn whose completion was sampled is a re-rendering of that turn, too.
  const markup = f.markupOwner();
  // Its cause is read off the completion it falls before: one that opened with `<think>` lost its reasoning.
  if (markup !== null)
    return at("reserialization", old, markup.owner, old, false, breakCause(markup.firstSampled, f.format, false));
  if (f.inSystemPrompt()) {
    // A new thread that starts from an answer of this rollout is its compaction, whatever its system prompt says
    // (Claude Code's first system block carries a per-conversation hash).
    const summary = f.summarySource();
    return summary === null ? at("sub_agent", old, old) : at("compaction", old, summary, summary, true);
  }
  // The harness dropped the context it had put last and goes on with the model's answer: the agent's own thread.
  if (f.movedContext()) return at("branch", old, old, old, false, "ephemeral_context");
  if (f.fewerTurns()) {
    const summary = f.summarySource();
    return at("compaction", old, summary ?? old, summary ?? old, summary !== null);
  }
  // Context that changed under the same system prompt, with no fewer turns: the harness rewrote what it wrote.
  return at("branch", old, old, old, false, cause(true));
}
