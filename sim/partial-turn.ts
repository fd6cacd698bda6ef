// A completions prompt that ends inside an assistant turn: a turn continued from given ids (rlgate's branches cut at
// a token position send the backbone's prompt and the first sampled ids of its answer). A model continues the turn;
// the sim decides the turn as it would at the turn's start, and sends its tokens after the longest token-aligned part
// it shares with the given text: the exact rest when the decided turn starts with it (a script, the same seed),
// otherwise the decided turn's tail after their common start (another seed's wording).
import { FAMILIES, type FamilyMarkup } from "../tokenizer/families.ts";
import { HARMONY_TOKENS } from "../tokenizer/harmony-render.ts";
import type { Generation } from "./generate.ts";

export interface PartialTurn {
  /** The prompt up to the turn's generation header (with the empty think block when thinking is off). */
  head: string;
  /** The turn's text given in the prompt. */
  text: string;
}

/** The partial assistant turn a prompt ends with; null when it ends at a generation header, or outside a turn. */
export function partialTurn(prompt: string, markup: FamilyMarkup): PartialTurn | null {
  const start = markup === FAMILIES.gptoss.markup ? harmonyTurnStart(prompt) : turnStart(prompt, markup);
  if (start < 0) return null;
  const text = prompt.slice(start);
  const ends = markup === FAMILIES.gptoss.markup ? (markup.alsoEnds ?? []) : [markup.turnEnd];
  if (text === "" || ends.some((end) => text.includes(end))) return null;
  return { head: prompt.slice(0, start), text };
}

/**
 * Where the model's last turn starts: after its generation header (and the empty think block when thinking is off),
 * or right after a tool output where the family starts the model's turn there (DeepSeek V3.1); -1 when neither is in
 * the prompt.
 */
function turnStart(prompt: string, markup: FamilyMarkup): number {
  const header = markup.header("assistant");
  let start = prompt.lastIndexOf(header);
  if (start >= 0) {
    start += header.length;
    const empty = markup.think?.empty;
    if (empty && prompt.startsWith(empty, start)) start += empty.length;
  }
  for (const after of markup.turns?.modelTurnAfter ?? []) {
    const at = prompt.lastIndexOf(after);
    if (at >= 0) start = Math.max(start, at + after.length);
  }
  return start;
}

/**
 * Harmony's model turn is several messages (analysis, a commentary preamble, a call), each `<|start|>assistant…`
 * and ended by `<|end|>`: the turn starts after the first header of the assistant messages since another author's.
 */
function harmonyTurnStart(prompt: string): number {
  const T = HARMONY_TOKENS;
  const header = `${T.start}assistant`;
  let first = -1;
  for (let at = prompt.lastIndexOf(T.start); at >= 0; at = at > 0 ? prompt.lastIndexOf(T.start, at - 1) : -1) {
    if (
      !prompt.startsWith(header, at) ||
      !/^(?:$|[\s<])/.test(prompt.slice(at + header.length, at + header.length + 1))
    )
      break;
    first = at;
  }
  return first < 0 ? -1 : first + header.length;
}

/**
 * The generation of the whole turn (`turn`, made with `maxTokens` plus its own length) continued after `given`: its
 * tokens after the longest run of whole tokens whose text starts `given`, cut to `maxTokens`. `tokenText` is each
 * id's own text with special tokens written out (`decode([id])`): the pieces a stream releases write none for them,
 * and harmony's turn is mostly special tokens (`<|channel|>`, `<|message|>`, `<|end|>`).
 */
export function continueTurn(
  turn: Generation,
  given: string,
  maxTokens: number,
  tokenText: (id: number) => string,
): Generation {
  let skip = 0;
  let at = 0;
  let chars = 0;
  while (skip < turn.ids.length) {
    const text = tokenText(turn.ids[skip]!);
    if (text === "" || !given.startsWith(text, at)) break;
    at += text.length;
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
