// lru-cache counts an entry's size when a new value is set: setting the same object again after it grew keeps its old
// size (lru-cache 11: sizes are updated only when the value differs), so a cache bounded by size would grow without
// bound. Deleting first makes the set count it again.
import type { LRUCache } from "lru-cache";

/** Sets `value` (which may be the entry already held) under `key` with its size counted now. */
export function reweigh<K extends NonNullable<unknown>, V extends NonNullable<unknown>>(
  cache: LRUCache<K, V>,
  key: K,
  value: V,
): void {
  cache.delete(key);
  cache.set(key, value);
}
