// Small deterministic hashing and seeded randomness. Everything the sim "samples" derives from these, so a seed and
// a request always give the same answer.
export { seededRandom } from "../util/seeded-random.ts";

const FNV_OFFSET = 0x811c9dc5;
const FNV_PRIME = 0x01000193;

/** FNV-1a over 32-bit integers (each id folded in as four bytes). Pass the previous value to extend a prefix. */
export function fnvIds(ids: readonly number[], h: number = FNV_OFFSET): number {
  for (let i = 0; i < ids.length; i++) h = fnvStep(h, ids[i]!);
  return h;
}

export function fnvStep(h: number, id: number): number {
  h = Math.imul(h ^ (id & 0xff), FNV_PRIME);
  h = Math.imul(h ^ ((id >>> 8) & 0xff), FNV_PRIME);
  h = Math.imul(h ^ ((id >>> 16) & 0xff), FNV_PRIME);
  h = Math.imul(h ^ ((id >>> 24) & 0xff), FNV_PRIME);
  return h >>> 0;
}

export function fnvString(text: string, h: number = FNV_OFFSET): number {
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), FNV_PRIME);
  return h >>> 0;
}

/** Murmur3's finalizer: spreads the bits of a combination of values. */
export function mix(...values: number[]): number {
  let h = 0x9e3779b9;
  for (const v of values) {
    h = Math.imul(h ^ (v >>> 0), 0x85ebca6b);
    h ^= h >>> 13;
    h = Math.imul(h, 0xc2b2ae35);
    h ^= h >>> 16;
  }
  return h >>> 0;
}

/** A hash mapped to the open interval (0, 1). */
export function unit(h: number): number {
  return ((h >>> 0) + 0.5) / 4294967296;
}

/** Standard normal variate from two hashes (Box–Muller). */
export function gaussian(h1: number, h2: number): number {
  return Math.sqrt(-2 * Math.log(unit(h1))) * Math.cos(2 * Math.PI * unit(h2));
}
