// Output buffers: allocated per call, or supplied by the caller (`{ out }`), e.g. to reuse buffers across
// batches or to write advantages straight into the bytes of an outgoing message. Every kernel writes
// every element of its outputs. Outputs must not overlap the inputs.
import { KernelError, KernelStatus } from "./errors.ts";
import type { KernelInput, KernelName, KernelOutput } from "./types.ts";

type Typed = Float32Array | Float64Array | Int32Array | Uint8Array;
type Ctor = Float32ArrayConstructor | Float64ArrayConstructor | Int32ArrayConstructor;
type Slot = [name: string, ctor: Ctor, length: number];

const tokensOf = (offsets: Int32Array) => offsets[offsets.length - 1]!;

/** What each kernel writes: a single array (name "") or named arrays, with their lengths. */
const slots: { readonly [K in KernelName]: (input: KernelInput<K>) => Slot[] } = {
  groupStats: (i) => [
    ["count", Int32Array, i.numGroups],
    ["mean", Float64Array, i.numGroups],
    ["std", Float64Array, i.numGroups],
    ["weightedMean", Float64Array, i.numGroups],
  ],
  broadcastRows: (i) => [["", Float32Array, tokensOf(i.offsets)]],
  gatherTokens: (i) => [["", Float32Array, i.index.length]],
  rowCounts: (i) => [["", Int32Array, i.offsets.length - 1]],
  maskedGae: (i) => [
    ["advantages", Float32Array, i.values.length],
    ["returns", Float32Array, i.values.length],
  ],
  maskedWhiten: (i) => [["", Float32Array, i.x.length]],
  treeNodeValues: (i) => [
    ["value", Float64Array, i.parent.length],
    ["leafCount", Int32Array, i.parent.length],
  ],
  importanceWeights: (i) => [["", Float32Array, i.logpOld.length]],
  klDivergence: (i) => [["", Float32Array, i.logp.length]],
  lossWeights: (i) => [["", Float32Array, i.mask.length]],
};

/**
 * A typed array on memory that is not zeroed first. Every kernel writes every element of its outputs (the
 * kernel tests hold each backend to that with NaN-filled `out`s), so zeroing would be wasted: with the malloc
 * settings `rlgate core` runs with, zeroing a 21 MB output costs ~1 ms, about a third of a GAE pass over it.
 */
function unzeroed(ctor: Ctor, length: number): Typed {
  const bytes = Buffer.allocUnsafeSlow(length * ctor.BYTES_PER_ELEMENT);
  return new ctor(bytes.buffer, bytes.byteOffset, length);
}

export function allocateOutput<K extends KernelName>(name: K, input: KernelInput<K>): KernelOutput<K> {
  const s = (slots[name] as (i: unknown) => Slot[])(input);
  if (s.length === 1 && s[0]![0] === "") return unzeroed(s[0]![1], s[0]![2]) as KernelOutput<K>;
  return Object.fromEntries(
    s.map(([key, ctor, length]) => [key, unzeroed(ctor, length)]),
  ) as unknown as KernelOutput<K>;
}

function overlaps(a: Typed, b: Typed): boolean {
  if (a.buffer !== b.buffer || a.byteLength === 0 || b.byteLength === 0) return false;
  return a.byteOffset < b.byteOffset + b.byteLength && b.byteOffset < a.byteOffset + a.byteLength;
}

function isTyped(x: unknown): x is Typed {
  return x instanceof Float32Array || x instanceof Float64Array || x instanceof Int32Array || x instanceof Uint8Array;
}

/** Checks a caller's `out`: the right arrays, types and lengths, overlapping no input nor each other. */
export function checkOutput<K extends KernelName>(name: K, input: KernelInput<K>, out: unknown): void {
  const fail = (detail: string): never => {
    throw new KernelError(KernelStatus.BAD_ARGUMENT, name, detail);
  };
  const s = (slots[name] as (i: unknown) => Slot[])(input);
  const arrays: Typed[] = [];
  for (const [key, ctor, length] of s) {
    const label = key === "" ? "out" : `out.${key}`;
    const a = key === "" ? out : (out as Record<string, unknown> | null)?.[key];
    if (!(a instanceof ctor)) fail(`${label} must be a ${ctor.name}`);
    if ((a as Typed).length !== length) fail(`${label} has ${(a as Typed).length} entries, expected ${length}`);
    arrays.push(a as Typed);
  }
  const inputs = Object.values(input as object).filter(isTyped);
  for (const [i, a] of arrays.entries()) {
    if (inputs.some((x) => overlaps(a, x))) fail("out must not overlap an input");
    if (arrays.slice(i + 1).some((x) => overlaps(a, x))) fail("outputs must not overlap each other");
  }
}
