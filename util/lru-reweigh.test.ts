// An entry that grew after it was set is counted at its new size: a cache bounded by size lets older entries go.
import assert from "node:assert/strict";
import { test } from "node:test";
import { LRUCache } from "lru-cache";
import { reweigh } from "./lru-reweigh.ts";

test("an entry that grew is weighed again: the bound holds", () => {
  const cache = new LRUCache<string, { size: number }>({ maxSize: 100, sizeCalculation: (v) => v.size });
  const old = { size: 10 };
  cache.set("old", old);
  const grown = { size: 10 };
  cache.set("grown", grown);
  grown.size = 95;
  cache.set("grown", grown); // what lru-cache does with the same object: the old size stays
  assert.equal(cache.calculatedSize, 20);
  reweigh(cache, "grown", grown);
  assert.equal(cache.calculatedSize, 95);
  assert.equal(cache.has("old"), false);
  assert.equal(cache.get("grown"), grown);
});
