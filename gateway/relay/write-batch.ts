// What one upstream read gives the harness, gathered into one write: events passed through as the upstream's bytes
// and events rewritten as text. Text is joined as text and encoded once, by the socket write; bytes are copied only
// when both kinds meet in one read.
import { isAscii } from "node:buffer";

/**
 * Bytes up to this length that are ASCII join the text as text (latin1 is then byte for byte): the held `[DONE]` after
 * a stream's rewritten events would otherwise turn the whole last write into bytes, encoded and copied once more
 * (~10 µs for the sim's 43 events).
 */
const SMALL_BYTES = 64;

export class WriteBatch {
  #pieces: Array<Buffer | string> = [];
  #text = "";

  add(piece: Buffer | string): void {
    if (typeof piece === "string") {
      this.#text += piece;
      return;
    }
    if (this.#text && piece.length <= SMALL_BYTES && isAscii(piece)) {
      this.#text += piece.toString("latin1");
      return;
    }
    if (this.#text) {
      this.#pieces.push(this.#text);
      this.#text = "";
    }
    this.#pieces.push(piece);
  }

  /** What was added since the last take, as one string or one Buffer; null when nothing was. */
  take(): Buffer | string | null {
    const pieces = this.#pieces;
    if (pieces.length === 0) {
      const text = this.#text;
      this.#text = "";
      return text === "" ? null : text;
    }
    if (this.#text) pieces.push(this.#text);
    this.#pieces = [];
    this.#text = "";
    if (pieces.length === 1) return pieces[0]!;
    return Buffer.concat(pieces.map((piece) => (typeof piece === "string" ? Buffer.from(piece) : piece)));
  }
}
