// A rollout's request bodies stored as the start of an earlier body of the same rollout plus their own rest. An
// agent's request re-sends its whole conversation every turn: late in a session ~50 kB, all but the newest messages
// the bytes of its previous request. Stored whole, every call's record was that large for LMDB to write (~0.2 ms of
// an agent-sized call's CPU on the 2-vCPU VM) and a 100-turn rollout held its conversation 100 times over.
import { LRUCache } from "lru-cache";

/** A body stored as `bytes(call seq)[0, length) ++ tail`; `depth`: references followed to reach a whole body. */
export interface StoredBodyRef {
  seq: number;
  length: number;
  tail: Uint8Array;
  depth: number;
}

export type StoredBody = Uint8Array | StoredBodyRef;

/** A shared start shorter than this is not worth a reference: the body is stored whole. */
const MIN_SHARED = 1024;
/**
 * Bodies are stored whole after this many references in a chain, so reading one call alone reads at most this many
 * others (reading a rollout's calls in order reads none: the decoder keeps the bodies it just resolved).
 */
export const MAX_BODY_DEPTH = 32;
/** Recent bodies kept per rollout: one per agent of it, roughly (a subagent's requests do not continue the main's). */
const BASES_PER_ROLLOUT = 4;

/** How many leading bytes `a` and `b` share: a binary search of memcmp over prefixes. */
export function sharedPrefixLength(a: Uint8Array, b: Uint8Array): number {
  const buffer = (bytes: Uint8Array) => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const x = buffer(a);
  const y = buffer(b);
  let low = 0; // x and y share [0, low)
  let high = Math.min(x.length, y.length);
  if (x.compare(y, 0, high, 0, high) === 0) return high;
  while (high - low > 1) {
    const mid = (low + high) >>> 1;
    if (x.compare(y, low, mid, low, mid) === 0) low = mid;
    else high = mid;
  }
  return low;
}

interface Base {
  seq: number;
  bytes: Uint8Array;
  depth: number;
}

/** The write side: each rollout's recent bodies, which a new body is stored against. Bounded by memory. */
export class RequestBases {
  readonly #rollouts: LRUCache<string, Base[]>;

  constructor(maxBytes = 64 * 1024 * 1024) {
    this.#rollouts = new LRUCache({
      maxSize: maxBytes,
      sizeCalculation: (bases) => bases.reduce((sum, base) => sum + base.bytes.length, 1),
    });
  }

  /**
   * How call `seq` of the rollout would store `bytes`, and `remember`, to call once the call's record is encoded: its
   * bytes then become a base for the rollout's next calls (a call whose record failed to encode is never referred to).
   */
  plan(rolloutKey: string, seq: number, bytes: Uint8Array): { stored: StoredBody; remember: () => void } {
    const bases = (this.#rollouts.get(rolloutKey) ?? []).filter((base) => base.seq !== seq); // stored again: not itself
    let best: Base | null = null;
    let shared = MIN_SHARED - 1;
    for (const base of bases) {
      if (base.depth >= MAX_BODY_DEPTH) continue; // the end of its chain: nothing refers to it
      const length = sharedPrefixLength(base.bytes, bytes);
      if (length > shared) [best, shared] = [base, length];
    }
    const stored: StoredBody =
      best === null ? bytes : { seq: best.seq, length: shared, tail: bytes.subarray(shared), depth: best.depth + 1 };
    const depth = stored instanceof Uint8Array ? 0 : stored.depth;
    // The body it continues makes way for it (that agent's next request continues this one), as do bodies at the end
    // of their chain (nothing refers to them any more).
    const kept = bases.filter((base) => base !== best && base.depth < MAX_BODY_DEPTH).slice(0, BASES_PER_ROLLOUT - 1);
    return { stored, remember: () => this.#rollouts.set(rolloutKey, [{ seq, bytes, depth }, ...kept]) };
  }

  /** A failed commit: the rollout's bases may name calls that are not stored. */
  forget(rolloutKey: string): void {
    this.#rollouts.delete(rolloutKey);
  }
}

/**
 * The read side: bodies of one rollout resolved through the calls they refer to (`lookup`: a call's stored body). The
 * last bodies it resolved are kept, so reading calls in order follows one reference each.
 */
export class BodyReader {
  readonly #lookup: (seq: number) => StoredBody | undefined;
  readonly #recent = new Map<number, Uint8Array>();

  constructor(lookup: (seq: number) => StoredBody | undefined) {
    this.#lookup = lookup;
  }

  /** Call `seq`'s body bytes from its stored form. */
  bytes(seq: number, stored: StoredBody): Uint8Array {
    const bytes = stored instanceof Uint8Array ? stored : this.#resolve(stored);
    this.#recent.delete(seq);
    this.#recent.set(seq, bytes);
    if (this.#recent.size > BASES_PER_ROLLOUT) this.#recent.delete(this.#recent.keys().next().value!);
    return bytes;
  }

  /**
   * Writes each reference's own rest where it lies, outermost first; what is still needed, a start of the body
   * referred to, comes from the next one; the whole body (or one resolved before) gives the last start.
   */
  #resolve(ref: StoredBodyRef): Uint8Array {
    const out = new Uint8Array(ref.length + ref.tail.length);
    out.set(ref.tail, ref.length);
    let need = ref.length; // out[0, need) is still to be written, from the body of call `current.seq`
    let current = ref;
    for (let followed = 0; ; followed++) {
      const known = this.#recent.get(current.seq);
      const next = known ?? this.#lookup(current.seq);
      if (next === undefined)
        throw new Error(`a stored request body refers to call ${current.seq}, which is not stored`);
      if (next instanceof Uint8Array) {
        if (next.length < need)
          throw new Error(`call ${current.seq}'s stored request body is shorter than referred to`);
        out.set(next.subarray(0, need), 0);
        return out;
      }
      if (followed > MAX_BODY_DEPTH) throw new Error("a stored request body's references do not end");
      if (need > next.length + next.tail.length)
        throw new Error(`call ${current.seq}'s stored request body is shorter than referred to`);
      if (need > next.length) out.set(next.tail.subarray(0, need - next.length), next.length);
      need = Math.min(need, next.length);
      current = next;
    }
  }
}
