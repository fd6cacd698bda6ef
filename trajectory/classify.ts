// The rules that name a divergence. Both the prefix tree and the naive reference gather the same facts about where a
// prompt left the existing sequences; this one function decides what that means.
import type { AttachKind } from "./types.ts";

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
  /** Whether the prompt and the old branch differ in their system prompts (see chat-format.ts). */
  inSystemPrompt(): boolean;
  /** Whether the prompt has fewer turns than the prompt of `oldBranch`'s call. */
  fewerTurns(): boolean;
}

export interface Divergence {
  kind: AttachKind;
  /** Sequence holding the matched prefix: storage reference and the segment the call inherits. */
  ref: number | null;
  /** Sequence reported in the break. */
  from: number | null;
}

export function classifyDivergence(f: DivergenceFacts): Divergence {
  if (f.empty) return { kind: "root", ref: null, from: null };
  if (f.identical !== null) return { kind: "retry", ref: f.identical, from: f.identical };
  if (f.extended !== null) return { kind: "extend", ref: f.extended, from: f.extended };
  const old = f.oldBranch;
  if (old === null) throw new Error("divergence without an old branch");
  // The prompt ends inside an earlier sequence (e.g. a continuation prefilled from an earlier completion).
  if (f.matched === f.promptLength) return { kind: "branch", ref: old, from: old };
  if (f.oldOwner !== null) return { kind: "reserialization", ref: old, from: f.oldOwner };
  if (f.inSystemPrompt()) return { kind: "sub_agent", ref: old, from: old };
  if (f.fewerTurns()) return { kind: "compaction", ref: old, from: old };
  return { kind: "branch", ref: old, from: old };
}
