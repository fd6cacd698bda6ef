// What one upstream read gives the harness, gathered into one write: events passed through as the upstream's bytes
// and events rewritten as text. Text is joined as text and encoded once, by the socket write; bytes are copied only
// when both kinds meet in one read.

export class WriteBatch {
  #pieces: Array<Buffer | string> = [];
  #text = "";

  add(piece: Buffer | string): void {
    if (typeof piece === "string") {
      this.#text += piece;
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
