// Tokenization cached per turn. Added tokens are split out before BPE runs, so encoding a rendered chat block by
// block (split before each turn-start marker) gives exactly the ids of encoding it whole; agent histories resend the
// same turns call after call, so most blocks are found in the cache.
import { LRUCache } from "lru-cache";

export class BlockEncoder {
  readonly #encode: (text: string) => number[];
  readonly #boundary: string;
  readonly #cache: LRUCache<string, number[]>;

  constructor(encode: (text: string) => number[], boundary: string, maxBlocks = 8192) {
    this.#encode = encode;
    this.#boundary = boundary;
    this.#cache = new LRUCache({ max: maxBlocks });
  }

  encode(text: string): number[] {
    const ids: number[] = [];
    let start = 0;
    while (start < text.length) {
      let end = text.indexOf(this.#boundary, start + 1);
      if (end < 0) end = text.length;
      const block = text.slice(start, end);
      let blockIds = this.#cache.get(block);
      if (!blockIds) {
        blockIds = this.#encode(block);
        this.#cache.set(block, blockIds);
      }
      for (const id of blockIds) ids.push(id);
      start = end;
    }
    return ids;
  }
}
