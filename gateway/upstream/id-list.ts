// A JSON list of token ids read out of a response's text: the prompt's ids, which vLLM returns with every answer. An
// agent's prompt late in a session is tens of thousands of ids (17k ids: ~100 kB of text), and each of its prompts is
// the previous one with tokens added at the end. On the 2-vCPU VM, for 17k ids: JSON.parse ~0.5 ms, a regular
// expression and a character loop over the string ~0.9 ms (how streamed chunks were read); the list's UTF-8 bytes read
// by a byte loop ~0.35 ms; the part a recent prompt of the same rollout already had compared as bytes and only the rest
// read ~0.2 ms (most of what is left is allocating the array).
import { LRUCache } from "lru-cache";
import { reweigh } from "../../util/lru-reweigh.ts";

const OPEN = 0x5b; // [
const CLOSE = 0x5d; // ]
const COMMA = 0x2c;
const ZERO = 0x30;
const NINE = 0x39;
/** Digits JSON.parse reads as an exact integer (the chunk scan's INT pattern). */
const MAX_DIGITS = 15;

export interface IdList {
  ids: number[];
  /** Where the list's text ends in the text it was read from (after its `]`). */
  end: number;
}

/** The ids as the memo keeps them: its own copy, never handed out (int32 unless an id does not fit one). */
type OwnIds = Int32Array | Float64Array;

interface KnownList {
  /** The list's UTF-8 bytes, `[` to `]`. */
  bytes: Buffer;
  ids: OwnIds;
}

/** The id lists a rollout's calls received most recently (one per agent of it, roughly), most recent first. */
export class RecentIdLists {
  readonly #lists: KnownList[] = [];
  readonly #keep: number;
  readonly #onChange: (lists: RecentIdLists) => void;

  /** `onChange` hears that the lists changed (their memory). */
  constructor(keep = 4, onChange: (lists: RecentIdLists) => void = () => {}) {
    this.#keep = keep;
    this.#onChange = onChange;
  }

  /** Rough memory held, in bytes. */
  get size(): number {
    let size = 1;
    for (const list of this.#lists) size += list.bytes.length + list.ids.byteLength;
    return size;
  }

  /** The most recent list that `bytes` continues (or repeats), and where in `bytes` its ids end. */
  continued(bytes: Buffer): { known: KnownList; at: number } | null {
    for (const known of this.#lists) {
      const at = known.bytes.length - 1; // its `]`
      if (at >= bytes.length) continue;
      const next = bytes[at];
      if (next !== CLOSE && (next !== COMMA || known.ids.length === 0)) continue;
      if (bytes.compare(known.bytes, 0, at, 0, at) === 0) return { known, at };
    }
    return null;
  }

  /** `list` was received; it continues `known` (which it replaces: the next prompt continues it), or no list. */
  remember(list: KnownList, known: KnownList | null): void {
    const index = known === null ? -1 : this.#lists.indexOf(known);
    if (index >= 0) this.#lists.splice(index, 1);
    this.#lists.unshift(list);
    if (this.#lists.length > this.#keep) this.#lists.pop();
    this.#onChange(this);
  }
}

/** Each rollout's recent id lists, bounded by memory (least recently used rollouts go first). */
export class RecentIdListsByRollout {
  readonly #rollouts: LRUCache<string, RecentIdLists>;

  constructor(maxBytes = 64 * 1024 * 1024) {
    this.#rollouts = new LRUCache({ maxSize: maxBytes, sizeCalculation: (lists) => lists.size });
  }

  /** The rollout's lists (null for a call no rollout claims: nothing to continue). */
  of(rolloutId: string | null): RecentIdLists | null {
    if (rolloutId === null) return null;
    let lists = this.#rollouts.get(rolloutId);
    if (lists === undefined) {
      // Counted again as they change; lists the cache let go of are not put back.
      lists = new RecentIdLists(4, (changed) => {
        if (this.#rollouts.peek(rolloutId) === changed) reweigh(this.#rollouts, rolloutId, changed);
      });
      this.#rollouts.set(rolloutId, lists);
    }
    return lists;
  }
}

let scratch = new Float64Array(4096);
/** No ids: what an empty list holds, and what a list read from its start continues. */
const NONE = new Int32Array(0);

/**
 * The ids of `bytes` from `from` (a position after `[` or a `,`) to its last byte, which must be the list's `]`,
 * after `head`; null unless every id is a JSON integer written as JSON.parse reads it exactly.
 */
function readIds(bytes: Buffer, from: number, head: OwnIds): OwnIds | null {
  const last = bytes.length - 1;
  let n = 0;
  let i = from;
  let largest = 0;
  if (i === last && bytes[i] === CLOSE && bytes[i - 1] === OPEN) return NONE;
  for (;;) {
    const start = i;
    let c = bytes[i]!;
    let value = 0;
    if (c === ZERO) c = bytes[++i]!;
    else
      while (c >= ZERO && c <= NINE) {
        value = value * 10 + (c - ZERO);
        c = bytes[++i]!;
      }
    if (i === start || i - start > MAX_DIGITS) return null;
    if (n === scratch.length) {
      const grown = new Float64Array(n * 2);
      grown.set(scratch);
      scratch = grown;
    }
    scratch[n++] = value;
    if (value > largest) largest = value;
    if (c === COMMA) i++;
    else if (c === CLOSE && i === last) break;
    else return null;
  }
  const wide = head instanceof Float64Array || largest > 0x7fffffff;
  const ids = wide ? new Float64Array(head.length + n) : new Int32Array(head.length + n);
  ids.set(head);
  ids.set(scratch.subarray(0, n), head.length);
  return ids;
}

/**
 * The ids as the caller gets them: a new array. Ids read from an Int32Array are small integers: filled from a
 * Float64Array, the array would hold doubles, which every later reader of the ids paid for (~0.2 ms a call over 17k
 * ids).
 */
function handedOut(ids: OwnIds): number[] {
  const out = new Array<number>(ids.length);
  for (let k = 0; k < ids.length; k++) out[k] = ids[k]!;
  return out;
}

/**
 * The list of non-negative integer ids that starts at `at` in `text` (its `[`), or null when the text there is not
 * one (the caller parses it). With `recent`, the part a recent list of the same rollout had is compared instead of
 * read, and the list is remembered (a copy of its own: the array returned is the caller's).
 */
export function readIdList(text: string, at: number, recent: RecentIdLists | null): IdList | null {
  if (text.charCodeAt(at) !== OPEN) return null;
  const close = text.indexOf("]", at);
  if (close < 0) return null;
  // UTF-8: a character outside ASCII becomes bytes no id can hold, and offsets stay those of the text.
  const bytes = Buffer.from(text.slice(at, close + 1), "utf8");
  if (bytes.length !== close + 1 - at) return null;
  const continued = recent?.continued(bytes) ?? null;
  const ids =
    continued === null
      ? readIds(bytes, 1, NONE)
      : continued.at === bytes.length - 1
        ? continued.known.ids
        : readIds(bytes, continued.at + 1, continued.known.ids);
  if (ids === null) return null;
  recent?.remember({ bytes, ids }, continued?.known ?? null);
  return { ids: handedOut(ids), end: close + 1 };
}
