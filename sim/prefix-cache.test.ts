import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { BLOCK_TOKENS, PrefixCache } from "./prefix-cache.ts";

const ids = (n: number, from = 0) => Array.from({ length: n }, (_, i) => from + i);

describe("sim prefix cache", () => {
  it("a new prompt is prefilled whole; the same prompt again only its last token", () => {
    const cache = new PrefixCache(10_000);
    assert.equal(cache.admit(ids(100)), 100);
    assert.equal(cache.admit(ids(96)), 1, "96 tokens are 6 full blocks, all cached");
    assert.deepEqual(cache.figures, { cachedTokens: 95, prefilledTokens: 101 });
  });

  it("a longer prompt with a cached prefix prefills from its first uncached block", () => {
    const cache = new PrefixCache(10_000);
    cache.admit(ids(100)); // 6 full blocks cached (96 tokens)
    assert.equal(cache.admit(ids(300)), 300 - 96);
  });

  it("a prompt that differs early reuses nothing after the difference (blocks chain on their prefix)", () => {
    const cache = new PrefixCache(10_000);
    cache.admit(ids(160));
    const changed = ids(160);
    changed[20] = 99_999; // inside block 1
    assert.equal(cache.admit(changed), 160 - BLOCK_TOKENS);
  });

  it("evicts the least recently used blocks when full", () => {
    const cache = new PrefixCache(4 * BLOCK_TOKENS);
    cache.admit(ids(64, 0)); // fills the cache
    cache.admit(ids(64, 1000)); // evicts the first prompt
    assert.equal(cache.heldBlocks, 4);
    assert.equal(cache.admit(ids(64, 0)), 64, "the first prompt was evicted");
    assert.equal(cache.admit(ids(64, 0)), 1);
  });
});
