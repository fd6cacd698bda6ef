// Wraps an already loaded addon (index.ts is the one module that loads it) as a Kernels backend:
// validates, allocates (or checks the caller's) outputs, passes positional arguments, and turns status
// codes into errors.
import { checkStatus } from "./errors.ts";
import { allocateOutput, checkOutput } from "./outputs.ts";
import type { KernelInput, KernelName, KernelOptions, KernelOutput, Kernels } from "./types.ts";
import { KERNEL_NAMES, LOSS_AGG_MODES } from "./types.ts";
import { validate } from "./validate.ts";

type NativeFn = (...args: unknown[]) => number;
type NativeAsyncFn = (...args: unknown[]) => Promise<number>;

/** What the addon exports (native/src/addon.cc). */
export type NativeAddon = { readonly [K in KernelName]: NativeFn } & {
  readonly [K in KernelName as `${K}Async`]: NativeAsyncFn;
} & {
  info(): { hardwareThreads: number; cudaLibrary: number; abi: number; simd: "avx512" | "avx2" | "base" };
  cudaDeviceCount(): number;
};

export const NATIVE_ABI = 2; // 2: maskedGae takes (rewards | null, rowRewards | null)

interface Prepared {
  args: unknown[];
  /** Whether the native function takes (threads, device) after `args`. */
  exec: boolean;
  /** Tokens processed, for choosing the device. */
  tokens: number;
}

const KL_CODES = { k1: 1, k2: 2, k3: 3 } as const;

// Positional arguments of each native function (native/src/addon.cc), outputs included.
const prepare: { readonly [K in KernelName]: (input: KernelInput<K>, out: KernelOutput<K>) => Prepared } = {
  groupStats: (i, o) => ({
    args: [i.values, i.groupIds, i.weights ?? null, i.numGroups, o.count, o.mean, o.std, o.weightedMean],
    exec: false,
    tokens: 0,
  }),
  broadcastRows: (i, o) => ({ args: [i.offsets, i.rowValues, i.mask ?? null, o], exec: true, tokens: o.length }),
  gatherTokens: (i, o) => ({ args: [i.values, i.index, i.mask ?? null, o], exec: true, tokens: o.length }),
  rowCounts: (i, o) => ({ args: [i.offsets, i.mask, o], exec: true, tokens: i.mask.length }),
  maskedGae: (i, o) => ({
    args: [
      i.offsets,
      i.rewards ?? null,
      i.rowRewards ?? null,
      i.values,
      i.mask,
      i.gamma,
      i.lambda,
      o.advantages,
      o.returns,
    ],
    exec: true,
    tokens: i.values.length,
  }),
  maskedWhiten: (i, o) => ({
    args: [
      i.offsets,
      i.x,
      i.mask,
      i.rowSegment ?? null,
      i.rowSegment ? (i.numSegments ?? 0) : 1,
      (i.shiftMean ?? true) ? 1 : 0,
      (i.unbiased ?? true) ? 1 : 0,
      i.eps ?? 1e-8,
      o,
    ],
    exec: true,
    tokens: i.x.length,
  }),
  treeNodeValues: (i, o) => ({
    args: [i.parent, i.leafNode, i.leafReward, o.value, o.leafCount],
    exec: false,
    tokens: 0,
  }),
  importanceWeights: (i, o) => ({
    args: [i.logpOld, i.logpRollout, i.mask ?? null, i.cap, o],
    exec: true,
    tokens: o.length,
  }),
  klDivergence: (i, o) => ({
    args: [i.logp, i.logpRef, i.mask ?? null, KL_CODES[i.kind], o],
    exec: true,
    tokens: o.length,
  }),
  lossWeights: (i, o) => ({
    args: [i.offsets, i.mask, LOSS_AGG_MODES.indexOf(i.mode), i.maxLen ?? 0, i.totalTokens ?? 0, i.totalSeqs ?? 0, o],
    exec: true,
    tokens: o.length,
  }),
};

export interface NativeBackendOptions {
  device: "cpu" | "cuda";
  /** With device "cuda": calls on fewer tokens than this run on the CPU (transfers would dominate). */
  cudaMinTokens: number;
  /** Threads for async calls that do not say. */
  asyncThreads: number;
}

export function nativeKernels(addon: NativeAddon, options: NativeBackendOptions): Kernels {
  const k: Record<string, unknown> = { backend: options.device === "cuda" ? "native-cuda" : "native-cpu" };
  const device = (p: Prepared) => (options.device === "cuda" && p.tokens >= options.cudaMinTokens ? 1 : 0);
  const argsFor = (p: Prepared, threads: number) => (p.exec ? [...p.args, threads, device(p)] : p.args);
  for (const name of KERNEL_NAMES) {
    const check = validate[name] as (i: unknown) => void;
    const prep = prepare[name] as (i: unknown, o: unknown) => Prepared;
    const sync = addon[name];
    const async = addon[`${name}Async`];
    const setup = (input: unknown, opts?: KernelOptions<typeof name>) => {
      check(input);
      let out: unknown = opts?.out;
      if (out === undefined) out = allocateOutput(name, input as never);
      else checkOutput(name, input as never, out);
      return { out, p: prep(input, out) };
    };
    k[name] = (input: unknown, opts?: KernelOptions<typeof name>) => {
      const { out, p } = setup(input, opts);
      checkStatus(sync(...argsFor(p, opts?.threads ?? 1)), name);
      return out;
    };
    k[`${name}Async`] = async (input: unknown, opts?: KernelOptions<typeof name>) => {
      const { out, p } = setup(input, opts);
      checkStatus(await async(...argsFor(p, opts?.threads ?? options.asyncThreads)), name);
      return out;
    };
  }
  return k as Kernels;
}
