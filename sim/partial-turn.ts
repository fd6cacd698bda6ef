// A completions prompt that ends inside an assistant turn: a turn continued from given ids (rlgate's branches cut at
// a token position send the backbone's prompt and the first sampled ids of its answer). A model continues the turn;
// the sim decides the turn as it would at the turn's start, and sends its tokens after the longest token-aligned part
// it shares with the given text: the exact rest when the decided turn starts with it (a script, the same seed),
// otherwise the decided turn's tail after their common start (another seed's wording).
import type { FamilyMarkup } from "../tokenizer/families.ts";
import type { Generation } from "./generate.ts";

export interface PartialTurn {
  /** The prompt up to the turn's generation header (with the empty think block when thinking is off). */
  head: string;
  /** The turn's text given in the prompt. */
  text: string;
}

/** The partial assistant turn a prompt ends with; null when it ends at a generation header, or outside a turn. */
export function partialTurn(prompt: string, markup: FamilyMarkup): PartialTurn | null {
  const header = markup.header("assistant");
  const at = prompt.lastIndexOf(header);
  if (at < 0) return null;
  let start = at + header.length;
  const empty = markup.think?.empty;
  if (empty && prompt.startsWith(empty, start)) start += empty.length;
  const text = prompt.slice(start);
  if (text === "" || text.includes(markup.turnEnd)) return null;
  return { head: prompt.slice(0, start), text };
}

/**
 * The generation of the whole turn (`turn`, made with `maxTokens` plus its own length) continued after `given`: its
 * tokens after the longest run of whole tokens whose text starts `given`, cut to `maxTokens`.
 */
export function continueTurn(turn: Generation, given: string, maxTokens: number): Generation {
  let skip = 0;
  let chars = 0;
  while (skip < turn.pieces.length && given.startsWith(turn.pieces[skip]!, chars) && turn.pieces[skip] !== "") {
    chars += turn.pieces[skip]!.length;
    skip++;
  }
  let ids = turn.ids.slice(skip);
  let pieces = turn.pieces.slice(skip);
  let { finishReason, stopReason } = turn;
  if (ids.length > maxTokens) {
    ids = ids.slice(0, maxTokens);
    pieces = pieces.slice(0, maxTokens);
    finishReason = "length";
    stopReason = null;
  }
  const toolCalls = turn.toolCalls
    .filter((span) => span.start >= chars)
    .map((span) => ({
      ...span,
      start: span.start - chars,
      nameEnd: span.nameEnd - chars,
      argsStart: span.argsStart - chars,
      argsEnd: span.argsEnd - chars,
    }));
  const fullText = turn.fullText.slice(chars);
  return { ...turn, ids, pieces, text: pieces.join(""), fullText, finishReason, stopReason, toolCalls };
}
