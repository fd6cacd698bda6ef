// Pure TypeScript implementations of every kernel: the oracle in tests and the fallback when the addon is
// missing or RLGATE_NATIVE=0. Plain loops, double accumulators and float stores, in the same arithmetic
// order as native/src/kernels.cc, so the two agree to rounding. Definitions: see types.ts.
import { KernelError, KernelStatus } from "./errors.ts";
import type {
  BroadcastRowsInput,
  GaeInput,
  GaeOutput,
  GatherTokensInput,
  GroupStats,
  GroupStatsInput,
  ImportanceInput,
  KernelInput,
  KernelName,
  KernelOutput,
  Kernels,
  KlInput,
  LossWeightsInput,
  RowCountsInput,
  TreeValues,
  TreeValuesInput,
  WhitenInput,
} from "./types.ts";
import { allocateOutput, checkOutput } from "./outputs.ts";
import { KERNEL_NAMES, type KernelOptions } from "./types.ts";
import { validate } from "./validate.ts";

export function groupStats({ values, groupIds, numGroups, weights }: GroupStatsInput, out?: GroupStats): GroupStats {
  const { count, mean, std, weightedMean } = out ?? allocateOutput("groupStats", { values, groupIds, numGroups });
  count.fill(0);
  const sum = new Float64Array(numGroups);
  const wsum = new Float64Array(numGroups);
  const wxsum = new Float64Array(numGroups);
  const sq = new Float64Array(numGroups);
  for (let r = 0; r < values.length; r++) {
    const id = groupIds[r]!;
    if (id === -1) continue;
    if (id < -1 || id >= numGroups)
      throw new KernelError(KernelStatus.BAD_INDEX, "groupStats", `group id ${id} at row ${r}`);
    const x = values[r]!;
    const w = weights ? weights[r]! : 1;
    sum[id] = sum[id]! + x;
    wsum[id] = wsum[id]! + w;
    wxsum[id] = wxsum[id]! + w * x;
    count[id] = count[id]! + 1;
  }
  for (let g = 0; g < numGroups; g++) mean[g] = count[g]! > 0 ? sum[g]! / count[g]! : 0;
  for (let r = 0; r < values.length; r++) {
    const id = groupIds[r]!;
    if (id < 0) continue;
    const d = values[r]! - mean[id]!;
    sq[id] = sq[id]! + d * d;
  }
  for (let g = 0; g < numGroups; g++) {
    std[g] = count[g]! > 1 ? Math.sqrt(sq[g]! / (count[g]! - 1)) : 0;
    weightedMean[g] = weights ? (wsum[g] !== 0 ? wxsum[g]! / wsum[g]! : 0) : mean[g]!;
  }
  return { count, mean, std, weightedMean };
}

export function broadcastRows({ offsets, rowValues, mask }: BroadcastRowsInput, target?: Float32Array): Float32Array {
  const rows = offsets.length - 1;
  const out = target ?? new Float32Array(offsets[rows]!);
  for (let r = 0; r < rows; r++) {
    const v = rowValues[r]!;
    for (let t = offsets[r]!; t < offsets[r + 1]!; t++) out[t] = !mask || mask[t] ? v : 0;
  }
  return out;
}

export function gatherTokens({ values, index, mask }: GatherTokensInput, target?: Float32Array): Float32Array {
  const out = target ?? new Float32Array(index.length);
  const n = values.length;
  for (let t = 0; t < index.length; t++) {
    const i = index[t]!;
    if (i < -1 || i >= n) throw new KernelError(KernelStatus.BAD_INDEX, "gatherTokens", `index ${i} at token ${t}`);
    out[t] = (!mask || mask[t]) && i >= 0 ? values[i]! : 0;
  }
  return out;
}

export function rowCounts({ offsets, mask }: RowCountsInput, target?: Int32Array): Int32Array {
  const rows = offsets.length - 1;
  const out = target ?? new Int32Array(rows);
  for (let r = 0; r < rows; r++) {
    let c = 0;
    for (let t = offsets[r]!; t < offsets[r + 1]!; t++) c += mask[t] ? 1 : 0;
    out[r] = c;
  }
  return out;
}

export function maskedGae(
  { offsets, rewards, rowRewards, values, mask, gamma, lambda }: GaeInput,
  out?: GaeOutput,
): GaeOutput {
  const tokens = values.length;
  const advantages = out?.advantages ?? new Float32Array(tokens);
  const returns = out?.returns ?? new Float32Array(tokens);
  const gl = gamma * lambda;
  for (let r = 0; r < offsets.length - 1; r++) {
    let nextValue = 0;
    let last = 0;
    let rowReward = rowRewards ? rowRewards[r]! : 0; // credited at the first mask-1 token met from the end
    for (let t = offsets[r + 1]! - 1; t >= offsets[r]!; t--) {
      if (!mask[t]) {
        // context token: skipped, the recurrence carries over it
        advantages[t] = 0;
        returns[t] = 0;
        continue;
      }
      const v = values[t]!;
      const reward = (rewards ? rewards[t]! : 0) + rowReward;
      rowReward = 0;
      const delta = reward + gamma * nextValue - v;
      const adv = delta + gl * last;
      advantages[t] = adv;
      returns[t] = adv + v;
      last = adv;
      nextValue = v;
    }
  }
  return { advantages, returns };
}

export function maskedWhiten(input: WhitenInput, target?: Float32Array): Float32Array {
  const { offsets, x, mask, rowSegment } = input;
  const shiftMean = input.shiftMean ?? true;
  const unbiased = input.unbiased ?? true;
  const eps = input.eps ?? 1e-8;
  const rows = offsets.length - 1;
  const nseg = rowSegment ? (input.numSegments ?? 0) : 1;
  const segOf = (r: number) => (rowSegment ? rowSegment[r]! : 0);
  for (let r = 0; r < rows; r++) {
    const g = segOf(r);
    if (g < -1 || g >= nseg) throw new KernelError(KernelStatus.BAD_INDEX, "maskedWhiten", `segment ${g} at row ${r}`);
  }
  const sum = new Float64Array(nseg);
  const count = new Float64Array(nseg);
  for (let r = 0; r < rows; r++) {
    const g = segOf(r);
    if (g < 0) continue;
    for (let t = offsets[r]!; t < offsets[r + 1]!; t++) {
      if (mask[t]) {
        sum[g] = sum[g]! + x[t]!;
        count[g] = count[g]! + 1;
      }
    }
  }
  const mean = new Float64Array(nseg);
  for (let g = 0; g < nseg; g++) mean[g] = count[g]! > 0 ? sum[g]! / count[g]! : 0;
  const sq = new Float64Array(nseg);
  for (let r = 0; r < rows; r++) {
    const g = segOf(r);
    if (g < 0) continue;
    const mu = mean[g]!;
    for (let t = offsets[r]!; t < offsets[r + 1]!; t++) {
      if (mask[t]) {
        const d = x[t]! - mu;
        sq[g] = sq[g]! + d * d;
      }
    }
  }
  const inv = new Float64Array(nseg);
  for (let g = 0; g < nseg; g++) {
    const n = count[g]!;
    const variance = n > 1 || (!unbiased && n > 0) ? sq[g]! / (unbiased ? n - 1 : n) : 0;
    inv[g] = 1 / Math.sqrt(variance + eps);
  }
  const out = target ?? new Float32Array(x.length);
  for (let r = 0; r < rows; r++) {
    const g = segOf(r);
    if (g < 0) {
      out.fill(0, offsets[r]!, offsets[r + 1]!);
      continue;
    }
    const mu = mean[g]!;
    const k = inv[g]!;
    const back = shiftMean ? 0 : mu;
    for (let t = offsets[r]!; t < offsets[r + 1]!; t++) out[t] = mask[t] ? (x[t]! - mu) * k + back : 0;
  }
  return out;
}

export function treeNodeValues({ parent, leafNode, leafReward }: TreeValuesInput, out?: TreeValues): TreeValues {
  const n = parent.length;
  for (let i = 0; i < n; i++) {
    const p = parent[i]!;
    if (p < -1 || p >= i) throw new KernelError(KernelStatus.BAD_TREE, "treeNodeValues", `parent[${i}] = ${p}`);
  }
  const sum = new Float64Array(n);
  const count = out?.leafCount.fill(0) ?? new Int32Array(n);
  for (let k = 0; k < leafNode.length; k++) {
    const node = leafNode[k]!;
    if (node === -1) continue;
    if (node < -1 || node >= n)
      throw new KernelError(KernelStatus.BAD_INDEX, "treeNodeValues", `leafNode[${k}] = ${node}`);
    sum[node] = sum[node]! + leafReward[k]!;
    count[node] = count[node]! + 1;
  }
  for (let i = n - 1; i >= 0; i--) {
    const p = parent[i]!;
    if (p >= 0) {
      sum[p] = sum[p]! + sum[i]!;
      count[p] = count[p]! + count[i]!;
    }
  }
  const value = out?.value ?? new Float64Array(n);
  for (let i = 0; i < n; i++) value[i] = count[i]! > 0 ? sum[i]! / count[i]! : 0;
  return { value, leafCount: count };
}

export function importanceWeights(
  { logpOld, logpRollout, mask, cap }: ImportanceInput,
  target?: Float32Array,
): Float32Array {
  const out = target ?? new Float32Array(logpOld.length);
  for (let t = 0; t < out.length; t++) {
    out[t] = mask && !mask[t] ? 0 : Math.min(Math.exp(logpOld[t]! - logpRollout[t]!), cap);
  }
  return out;
}

// Clamp that lets NaN through (as native/src/kernels.cc's clamp_nan).
const clampNan = (x: number, lo: number, hi: number) => (x < lo ? lo : x > hi ? hi : x);

export function klDivergence({ logp, logpRef, mask, kind }: KlInput, target?: Float32Array): Float32Array {
  const out = target ?? new Float32Array(logp.length);
  for (let t = 0; t < out.length; t++) {
    if (mask && !mask[t]) {
      out[t] = 0;
      continue;
    }
    const lp = logp[t]!;
    const ref = logpRef[t]!;
    if (kind === "k1") {
      out[t] = lp - ref;
    } else if (kind === "k2") {
      const d = lp - ref;
      out[t] = 0.5 * d * d;
    } else {
      const d = clampNan(ref - lp, -20, 20);
      out[t] = clampNan(Math.exp(d) - d - 1, -10, 10);
    }
  }
  return out;
}

export function lossWeights(input: LossWeightsInput, target?: Float32Array): Float32Array {
  const { offsets, mask, mode } = input;
  const rows = offsets.length - 1;
  const counts = rowCounts({ offsets, mask });
  let tokens = 0;
  let seqs = 0;
  let longest = 0;
  for (let r = 0; r < rows; r++) {
    tokens += counts[r]!;
    seqs += counts[r]! > 0 ? 1 : 0;
    longest = Math.max(longest, counts[r]!);
  }
  if (input.totalTokens) tokens = input.totalTokens;
  if (input.totalSeqs) seqs = input.totalSeqs;
  if (input.maxLen) longest = input.maxLen;
  const scale = new Float64Array(rows);
  for (let r = 0; r < rows; r++) {
    const c = counts[r]!;
    if (c === 0) continue;
    if (mode === "token-mean") scale[r] = 1 / tokens;
    else if (mode === "seq-mean-token-mean") scale[r] = 1 / (c * seqs);
    else if (mode === "seq-mean-token-sum") scale[r] = 1 / seqs;
    else scale[r] = 1 / longest;
  }
  return broadcastRows({ offsets, rowValues: scale, mask }, target);
}

const implementations: {
  readonly [K in KernelName]: (input: KernelInput<K>, out: KernelOutput<K>) => KernelOutput<K>;
} = {
  groupStats,
  broadcastRows,
  gatherTokens,
  rowCounts,
  maskedGae,
  maskedWhiten,
  treeNodeValues,
  importanceWeights,
  klDivergence,
  lossWeights,
};

function build(): Kernels {
  const k: Record<string, unknown> = { backend: "reference" };
  for (const name of KERNEL_NAMES) {
    const run = (input: unknown, options?: KernelOptions<typeof name>) => {
      (validate[name] as (i: unknown) => void)(input);
      let out: unknown = options?.out;
      if (out === undefined) out = allocateOutput(name, input as never);
      else checkOutput(name, input as never, out);
      (implementations[name] as (i: unknown, o: unknown) => unknown)(input, out);
      return out;
    };
    k[name] = run;
    // Same work, on the calling thread: a rejected promise rather than a throw keeps async callers uniform.
    k[`${name}Async`] = async (input: unknown, options?: KernelOptions<typeof name>) => run(input, options);
  }
  return k as Kernels;
}

/** The reference backend, validated like the native one. */
export const referenceKernels: Kernels = build();
