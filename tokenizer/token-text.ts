// Token ids → text the way vLLM detokenizes output: byte-level BPE pieces turned back into bytes, special tokens
// skipped (`skip_special_tokens=True`), and text released only once its bytes form whole UTF-8 characters.
import { qwen3Tokenizer } from "./qwen3.ts";

/** Qwen3 ids 151643..151656 are special (skipped in output text); 151657..151668 (<think>, <tool_call>, ...) are not. */
export const FIRST_ADDED_ID = 151643;
const LAST_SPECIAL_ID = 151656;
export const VOCAB_SIZE = 151669;

export const TOKEN = {
  endOfText: 151643,
  imStart: 151644,
  imEnd: 151645,
  toolCallOpen: 151657,
  toolCallClose: 151658,
  thinkOpen: 151667,
  thinkClose: 151668,
} as const;

// GPT-2's bytes_to_unicode table, inverted: the character a byte-level piece uses → the byte it stands for.
const BYTE_OF_CHAR: Map<number, number> = (() => {
  const printable: number[] = [];
  for (let b = 33; b <= 126; b++) printable.push(b);
  for (let b = 161; b <= 172; b++) printable.push(b);
  for (let b = 174; b <= 255; b++) printable.push(b);
  const map = new Map<number, number>();
  for (const b of printable) map.set(b, b);
  let n = 0;
  for (let b = 0; b < 256; b++) {
    if (!printable.includes(b)) map.set(256 + n++, b);
  }
  return map;
})();

/** How one vocabulary turns ids into output text. */
export interface TokenText {
  /** The bytes a token adds to output text (empty for special tokens). */
  tokenBytes(id: number): Uint8Array;
  /** One token decoded on its own (`tokenizer.decode([id])`: "\ufffd" for partial bytes). */
  tokenString(id: number): string;
  textPieces(ids: readonly number[]): string[];
}

export interface ByteLevelVocab {
  /** The vocabulary piece of an id (byte-level form, e.g. "Ġhello"). */
  idToToken(id: number): string;
  decode(ids: readonly number[]): string;
  /** Added tokens (written as themselves) and whether each is special (skipped in output text). */
  isAdded(id: number): boolean;
  isSpecial(id: number): boolean;
}

const encoder = new TextEncoder();
const EMPTY = new Uint8Array(0);

/** Output text of a byte-level BPE vocabulary (GPT-2 style: Qwen, Llama 3, ...), cached per id. */
export function byteLevelText(vocab: () => ByteLevelVocab): TokenText {
  const bytesCache: (Uint8Array | undefined)[] = [];
  const stringCache: (string | undefined)[] = [];
  const tokenBytes = (id: number): Uint8Array => {
    let bytes = bytesCache[id];
    if (bytes) return bytes;
    const v = vocab();
    if (v.isAdded(id)) {
      bytes = v.isSpecial(id) ? EMPTY : encoder.encode(v.idToToken(id));
    } else {
      const piece = v.idToToken(id);
      bytes = new Uint8Array(piece.length);
      let n = 0;
      for (const ch of piece) {
        const b = BYTE_OF_CHAR.get(ch.codePointAt(0)!);
        if (b !== undefined) bytes[n++] = b;
      }
      bytes = bytes.subarray(0, n);
    }
    bytesCache[id] = bytes;
    return bytes;
  };
  const tokenString = (id: number): string => {
    let s = stringCache[id];
    if (s === undefined) {
      s = vocab().decode([id]);
      stringCache[id] = s;
    }
    return s;
  };
  return { tokenBytes, tokenString, textPieces: (ids) => piecesOf(ids, tokenBytes) };
}

export const QWEN3_TEXT: TokenText = byteLevelText(() => {
  const tok = qwen3Tokenizer();
  return {
    idToToken: tok.idToToken,
    decode: tok.decode,
    isAdded: (id) => id >= FIRST_ADDED_ID,
    isSpecial: (id) => id >= FIRST_ADDED_ID && id <= LAST_SPECIAL_ID,
  };
});

/** The bytes a token adds to output text (empty for special tokens). */
export const tokenBytes = QWEN3_TEXT.tokenBytes;

/** One token decoded on its own, as vLLM names it in logprobs (`tokenizer.decode([id])`: "\ufffd" for partial bytes). */
export const tokenString = QWEN3_TEXT.tokenString;

/**
 * The text each token releases when the ids are detokenized incrementally: a token that ends inside a multi-byte
 * character releases nothing, and the token that completes it releases the whole character.
 */
export function textPieces(ids: readonly number[]): string[] {
  return QWEN3_TEXT.textPieces(ids);
}

function piecesOf(ids: readonly number[], tokenBytes: (id: number) => Uint8Array): string[] {
  const decoder = new TextDecoder("utf-8");
  const pieces: string[] = new Array(ids.length);
  for (let i = 0; i < ids.length; i++) pieces[i] = decoder.decode(tokenBytes(ids[i]!), { stream: true });
  const rest = decoder.decode();
  if (rest && ids.length > 0) pieces[ids.length - 1] += rest;
  return pieces;
}
