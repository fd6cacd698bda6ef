// The sim's model of an inference server's automatic prefix caching (vLLM's APC, SGLang's radix cache): the KV cache
// is kept in blocks of 16 tokens, each full block named by a hash of its tokens chained to the hash of the block
// before it, so a block is reused only when the whole prefix up to it matches. A prompt's cached prefix is its first
// blocks that are still held; the rest must be prefilled, which is what makes time to first token grow with the
// prompt tokens this server has not seen. Blocks are evicted least recently used first, a prompt's tail before its head.
import { fnvIds, mix } from "./hash.ts";

export const BLOCK_TOKENS = 16;

export interface PrefixCacheFigures {
  /** Prompt tokens read from the cache. */
  cachedTokens: number;
  /** Prompt tokens that had to be prefilled. */
  prefilledTokens: number;
}

export class PrefixCache {
  readonly capacityBlocks: number;
  readonly figures: PrefixCacheFigures = { cachedTokens: 0, prefilledTokens: 0 };
  // Insertion order is recency: the first key is the least recently used block.
  readonly #blocks = new Map<number, true>();

  /** `capacityTokens`: the KV cache's size in tokens (rounded down to whole blocks). */
  constructor(capacityTokens: number) {
    this.capacityBlocks = Math.max(1, Math.floor(capacityTokens / BLOCK_TOKENS));
  }

  get heldBlocks(): number {
    return this.#blocks.size;
  }

  /** Serves one prompt: how many of its tokens were cached, and caches its full blocks. Returns the tokens to prefill. */
  admit(ids: readonly number[]): number {
    const full = Math.floor(ids.length / BLOCK_TOKENS);
    const keys: number[] = [];
    let parent = 0;
    let cachedBlocks = 0;
    let matching = true;
    for (let b = 0; b < full; b++) {
      parent = blockKey(parent, ids.slice(b * BLOCK_TOKENS, (b + 1) * BLOCK_TOKENS));
      keys.push(parent);
      if (matching && this.#blocks.has(parent)) cachedBlocks++;
      else matching = false;
    }
    // Touch from the tail: the head (shared by more prompts) ends up the most recently used.
    for (let b = keys.length - 1; b >= 0; b--) {
      this.#blocks.delete(keys[b]!);
      this.#blocks.set(keys[b]!, true);
    }
    while (this.#blocks.size > this.capacityBlocks) this.#blocks.delete(this.#blocks.keys().next().value!);
    // Like vLLM, a fully cached prompt still computes its last token.
    const cached = Math.min(cachedBlocks * BLOCK_TOKENS, ids.length - 1);
    const prefill = ids.length - Math.max(0, cached);
    this.figures.cachedTokens += ids.length - prefill;
    this.figures.prefilledTokens += prefill;
    return prefill;
  }
}

/** A block's name: 53 bits from two 32-bit hashes of (parent, tokens), safe as a number key. */
function blockKey(parent: number, tokens: readonly number[]): number {
  const h = fnvIds(tokens, mix(parent, 0x9e37));
  const low = mix(h, parent, 0x85eb) & 0x1fffff;
  return h * 0x200000 + low;
}
