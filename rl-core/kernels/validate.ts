// Argument checks shared by every backend, so a bad call fails the same way whichever backend runs it.
// Element-wise index checks (group ids, tree parents, gather indices) happen inside the kernels.
import { KernelError, KernelStatus } from "./errors.ts";
import { KL_KINDS, LOSS_AGG_MODES, type KernelInput, type KernelName } from "./types.ts";

type ArrayCtor = Float32ArrayConstructor | Float64ArrayConstructor | Int32ArrayConstructor | Uint8ArrayConstructor;

function fail(status: number, kernel: string, detail: string): never {
  throw new KernelError(status, kernel, detail);
}

function expectArray(kernel: string, name: string, value: unknown, ctor: ArrayCtor, length?: number): void {
  if (!(value instanceof ctor)) fail(KernelStatus.BAD_ARGUMENT, kernel, `${name} must be a ${ctor.name}`);
  if (length !== undefined && value.length !== length) {
    fail(KernelStatus.BAD_ARGUMENT, kernel, `${name} has ${value.length} entries, expected ${length}`);
  }
}

function expectOptional(kernel: string, name: string, value: unknown, ctor: ArrayCtor, length: number): void {
  if (value !== undefined && value !== null) expectArray(kernel, name, value, ctor, length);
}

function expectNumber(kernel: string, name: string, value: unknown, check: (x: number) => boolean, what: string): void {
  if (typeof value !== "number" || !check(value)) fail(KernelStatus.BAD_ARGUMENT, kernel, `${name} must be ${what}`);
}

const isCount = (x: number) => Number.isInteger(x) && x >= 0 && x <= 0x7fffffff;
const isNonNegative = (x: number) => x >= 0 && x !== Infinity;

/** Checks offsets and returns the token count (offsets[rows]). */
export function checkOffsets(kernel: string, offsets: unknown): number {
  expectArray(kernel, "offsets", offsets, Int32Array);
  const o = offsets as Int32Array;
  if (o.length < 1) fail(KernelStatus.BAD_OFFSETS, kernel, "offsets needs rows + 1 entries (at least [0])");
  if (o[0] !== 0) fail(KernelStatus.BAD_OFFSETS, kernel, "offsets[0] must be 0");
  for (let r = 1; r < o.length; r++) {
    if (o[r]! < o[r - 1]!) fail(KernelStatus.BAD_OFFSETS, kernel, `offsets decrease at row ${r - 1}`);
  }
  return o[o.length - 1]!;
}

export const validate: { readonly [K in KernelName]: (input: KernelInput<K>) => void } = {
  groupStats(i) {
    const k = "groupStats";
    expectArray(k, "values", i.values, Float64Array);
    expectArray(k, "groupIds", i.groupIds, Int32Array, i.values.length);
    expectOptional(k, "weights", i.weights, Float64Array, i.values.length);
    expectNumber(k, "numGroups", i.numGroups, isCount, "a non-negative integer");
  },
  broadcastRows(i) {
    const k = "broadcastRows";
    const tokens = checkOffsets(k, i.offsets);
    expectArray(k, "rowValues", i.rowValues, Float64Array, i.offsets.length - 1);
    expectOptional(k, "mask", i.mask, Uint8Array, tokens);
  },
  gatherTokens(i) {
    const k = "gatherTokens";
    expectArray(k, "values", i.values, Float64Array);
    expectArray(k, "index", i.index, Int32Array);
    expectOptional(k, "mask", i.mask, Uint8Array, i.index.length);
  },
  rowCounts(i) {
    const k = "rowCounts";
    const tokens = checkOffsets(k, i.offsets);
    expectArray(k, "mask", i.mask, Uint8Array, tokens);
  },
  maskedGae(i) {
    const k = "maskedGae";
    const tokens = checkOffsets(k, i.offsets);
    expectOptional(k, "rewards", i.rewards, Float32Array, tokens);
    expectOptional(k, "rowRewards", i.rowRewards, Float64Array, i.offsets.length - 1);
    expectArray(k, "values", i.values, Float32Array, tokens);
    expectArray(k, "mask", i.mask, Uint8Array, tokens);
    expectNumber(k, "gamma", i.gamma, Number.isFinite, "a finite number");
    expectNumber(k, "lambda", i.lambda, Number.isFinite, "a finite number");
  },
  maskedWhiten(i) {
    const k = "maskedWhiten";
    const tokens = checkOffsets(k, i.offsets);
    expectArray(k, "x", i.x, Float32Array, tokens);
    expectArray(k, "mask", i.mask, Uint8Array, tokens);
    expectOptional(k, "rowSegment", i.rowSegment, Int32Array, i.offsets.length - 1);
    if (i.rowSegment) expectNumber(k, "numSegments", i.numSegments, isCount, "a non-negative integer");
    if (i.eps !== undefined) expectNumber(k, "eps", i.eps, isNonNegative, "a finite number >= 0");
  },
  treeNodeValues(i) {
    const k = "treeNodeValues";
    expectArray(k, "parent", i.parent, Int32Array);
    expectArray(k, "leafNode", i.leafNode, Int32Array);
    expectArray(k, "leafReward", i.leafReward, Float64Array, i.leafNode.length);
  },
  importanceWeights(i) {
    const k = "importanceWeights";
    expectArray(k, "logpOld", i.logpOld, Float32Array);
    expectArray(k, "logpRollout", i.logpRollout, Float32Array, i.logpOld.length);
    expectOptional(k, "mask", i.mask, Uint8Array, i.logpOld.length);
    expectNumber(k, "cap", i.cap, (x) => x > 0, "a number > 0 (Infinity: no truncation)");
  },
  klDivergence(i) {
    const k = "klDivergence";
    expectArray(k, "logp", i.logp, Float32Array);
    expectArray(k, "logpRef", i.logpRef, Float32Array, i.logp.length);
    expectOptional(k, "mask", i.mask, Uint8Array, i.logp.length);
    if (!KL_KINDS.includes(i.kind)) fail(KernelStatus.BAD_MODE, k, `kind must be one of ${KL_KINDS.join(", ")}`);
  },
  lossWeights(i) {
    const k = "lossWeights";
    const tokens = checkOffsets(k, i.offsets);
    expectArray(k, "mask", i.mask, Uint8Array, tokens);
    if (!LOSS_AGG_MODES.includes(i.mode)) {
      fail(KernelStatus.BAD_MODE, k, `mode must be one of ${LOSS_AGG_MODES.join(", ")}`);
    }
    for (const name of ["maxLen", "totalTokens", "totalSeqs"] as const) {
      if (i[name] !== undefined) expectNumber(k, name, i[name], isNonNegative, "a finite number >= 0");
    }
  },
};
