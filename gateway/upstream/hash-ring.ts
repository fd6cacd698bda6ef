// Consistent hashing of rollout ids onto replicas: each replica owns many points (virtual nodes) on a 32-bit ring and
// a key belongs to the first point at or after its hash. Adding a replica takes over about 1/N of the keys (from every
// other replica alike) and removing one hands its keys to the next points, so a change of fleet moves few rollouts
// away from the replica whose KV cache holds their prefix.

/** Points per replica: with 160 a replica's share of the ring stays within a few percent of 1/N. */
export const VIRTUAL_NODES = 160;

const FNV_OFFSET = 0x811c9dc5;
const FNV_PRIME = 0x01000193;

/** FNV-1a over the string's UTF-16 units, then murmur3's finalizer so that near-identical ids land far apart. */
export function hashKey(key: string): number {
  let h = FNV_OFFSET;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), FNV_PRIME);
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

export class HashRing<T> {
  readonly #members: T[];
  /** Sorted point hashes and, at the same index, the member that owns the point. */
  readonly #points: Uint32Array;
  readonly #owners: Uint32Array;

  /** `nameOf` gives a member's stable name (a replica's URL): the same name always gets the same points. */
  constructor(members: readonly T[], nameOf: (member: T) => string, virtualNodes = VIRTUAL_NODES) {
    this.#members = [...members];
    const points: Array<[number, number]> = [];
    this.#members.forEach((member, index) => {
      const name = nameOf(member);
      for (let v = 0; v < virtualNodes; v++) points.push([hashKey(`${name}#${v}`), index]);
    });
    // Ties (two names hashing to the same point) are broken by name order, so the ring does not depend on list order.
    points.sort((a, b) => a[0] - b[0] || nameOf(this.#members[a[1]]!).localeCompare(nameOf(this.#members[b[1]]!)));
    this.#points = Uint32Array.from(points, (p) => p[0]);
    this.#owners = Uint32Array.from(points, (p) => p[1]);
  }

  get size(): number {
    return this.#members.length;
  }

  /** The members in ring order from `key`'s point: the owner first, then where its keys go when the owner is out. */
  *walk(key: string): Generator<T> {
    const n = this.#points.length;
    if (n === 0) return;
    const h = hashKey(key);
    let lo = 0;
    let hi = n;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.#points[mid]! < h) lo = mid + 1;
      else hi = mid;
    }
    const seen = new Set<number>();
    for (let i = 0; i < n && seen.size < this.#members.length; i++) {
      const owner = this.#owners[(lo + i) % n]!;
      if (seen.has(owner)) continue;
      seen.add(owner);
      yield this.#members[owner]!;
    }
  }

  /** The member owning `key` (undefined on an empty ring). */
  owner(key: string): T | undefined {
    for (const member of this.walk(key)) return member;
    return undefined;
  }
}
