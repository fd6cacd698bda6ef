// Tokenization cached per turn. Added tokens are split out before BPE runs, so encoding a rendered chat block by
// block (split before each turn opener: ChatML's one, or DeepSeek's several) gives exactly the ids of encoding it
// whole; agent histories resend the same turns call after call, so most blocks are found in the cache.
import { LRUCache } from "lru-cache";

export class BlockEncoder {
  readonly #encode: (text: string) => number[];
  readonly #boundaries: readonly string[];
  readonly #cache: LRUCache<string, number[]>;

  constructor(encode: (text: string) => number[], boundaries: string | readonly string[], maxBlocks = 8192) {
    this.#encode = encode;
    this.#boundaries = typeof boundaries === "string" ? [boundaries] : boundaries;
    this.#cache = new LRUCache({ max: maxBlocks });
  }

  encode(text: string): number[] {
    const ids: number[] = [];
    // The next place of each boundary, looked for again only once passed: a boundary the text lacks is scanned once.
    const next = this.#boundaries.map(() => -1);
    let start = 0;
    while (start < text.length) {
      let end = text.length;
      this.#boundaries.forEach((boundary, b) => {
        if (next[b]! !== Infinity && next[b]! <= start) {
          const at = text.indexOf(boundary, start + 1);
          next[b] = at < 0 ? Infinity : at;
        }
        end = Math.min(end, next[b]!);
      });
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
