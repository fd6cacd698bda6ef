// Token ids → text the way vLLM detokenizes output: byte-level BPE pieces turned back into bytes, special tokens
// skipped (`skip_special_tokens=True`), and text released only once its bytes form whole UTF-8 characters.
import { qwen3Tokenizer } from "../tokenizer/qwen3.ts";

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

const bytesCache: (Uint8Array | undefined)[] = [];
const stringCache: (string | undefined)[] = [];
const encoder = new TextEncoder();
const EMPTY = new Uint8Array(0);

/** The bytes a token adds to output text (empty for special tokens). */
export function tokenBytes(id: number): Uint8Array {
  let bytes = bytesCache[id];
  if (bytes) return bytes;
  const tok = qwen3Tokenizer();
  if (id >= FIRST_ADDED_ID) {
    bytes = id <= LAST_SPECIAL_ID ? EMPTY : encoder.encode(tok.idToToken(id));
  } else {
    const piece = tok.idToToken(id);
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
}

/** One token decoded on its own, as vLLM names it in logprobs (`tokenizer.decode([id])`: "\ufffd" for partial bytes). */
export function tokenString(id: number): string {
  let s = stringCache[id];
  if (s === undefined) {
    s = qwen3Tokenizer().decode([id]);
    stringCache[id] = s;
  }
  return s;
}

/**
 * The text each token releases when the ids are detokenized incrementally: a token that ends inside a multi-byte
 * character releases nothing, and the token that completes it releases the whole character.
 */
export function textPieces(ids: readonly number[]): string[] {
  const decoder = new TextDecoder("utf-8");
  const pieces: string[] = new Array(ids.length);
  for (let i = 0; i < ids.length; i++) pieces[i] = decoder.decode(tokenBytes(ids[i]!), { stream: true });
  const rest = decoder.decode();
  if (rest && ids.length > 0) pieces[ids.length - 1] += rest;
  return pieces;
}
