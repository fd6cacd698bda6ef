// Seeded random ragged batches shaped like agent trajectories (context runs with mask 0 between sampled
// runs with mask 1), for the native-vs-reference tests and bench/kernels.ts.
import { seededRandom } from "../../util/seeded-random.ts";

export { seededRandom };

export interface RandomBatchOptions {
  rows: number;
  minLen: number;
  maxLen: number;
  /** Mean length of a run of equal mask values. */
  meanRun?: number;
  /** Rows per group (the last group may be smaller). */
  groupSize?: number;
  /** Fraction of rows with no tokens at all. */
  emptyRowRate?: number;
}

export interface RandomBatch {
  offsets: Int32Array;
  mask: Uint8Array;
  /** Token-level numbers: rewards (sparse), values, log-probabilities. */
  tokenRewards: Float32Array;
  values: Float32Array;
  logpOld: Float32Array;
  logpRollout: Float32Array;
  logpRef: Float32Array;
  /** Row-level outcome rewards and group ids. */
  rowRewards: Float64Array;
  groupIds: Int32Array;
  numGroups: number;
}

export function randomBatch(seed: number, options: RandomBatchOptions): RandomBatch {
  const rand = seededRandom(seed);
  const { rows, minLen, maxLen } = options;
  const meanRun = options.meanRun ?? 64;
  const groupSize = options.groupSize ?? 8;
  const offsets = new Int32Array(rows + 1);
  for (let r = 0; r < rows; r++) {
    const empty = rand() < (options.emptyRowRate ?? 0);
    const len = empty ? 0 : minLen + Math.floor(rand() * (maxLen - minLen + 1));
    offsets[r + 1] = offsets[r]! + len;
  }
  const tokens = offsets[rows]!;
  const mask = new Uint8Array(tokens);
  const tokenRewards = new Float32Array(tokens);
  const values = new Float32Array(tokens);
  const logpOld = new Float32Array(tokens);
  const logpRollout = new Float32Array(tokens);
  const logpRef = new Float32Array(tokens);
  for (let r = 0; r < rows; r++) {
    let on = 0;
    let left = 0;
    for (let t = offsets[r]!; t < offsets[r + 1]!; t++) {
      if (left === 0) {
        on ^= 1;
        left = 1 + Math.floor(rand() * 2 * meanRun);
      }
      left--;
      mask[t] = on ^ 1; // rows start with a context run
    }
  }
  for (let t = 0; t < tokens; t++) {
    tokenRewards[t] = rand() < 0.01 ? rand() * 2 - 1 : 0;
    values[t] = rand() * 2 - 1;
    const lp = -Math.abs(Math.log(rand() + 1e-12)) * 0.5;
    logpRollout[t] = lp;
    logpOld[t] = lp + (rand() - 0.5) * 0.2;
    logpRef[t] = lp + (rand() - 0.5) * 0.4;
  }
  const rowRewards = new Float64Array(rows);
  const groupIds = new Int32Array(rows);
  for (let r = 0; r < rows; r++) {
    rowRewards[r] = rand() < 0.5 ? Math.round(rand()) : rand();
    groupIds[r] = Math.floor(r / groupSize);
  }
  return {
    offsets,
    mask,
    tokenRewards,
    values,
    logpOld,
    logpRollout,
    logpRef,
    rowRewards,
    groupIds,
    numGroups: Math.ceil(rows / groupSize),
  };
}

/** A random forest in topological order (parent[i] < i) and leaves placed on random childless nodes. */
export function randomForest(seed: number, nodes: number, roots: number): { parent: Int32Array; leaves: Int32Array } {
  const rand = seededRandom(seed);
  const parent = new Int32Array(nodes);
  const hasChild = new Uint8Array(nodes);
  for (let i = 0; i < nodes; i++) {
    parent[i] = i < roots ? -1 : Math.floor(rand() * i);
    if (parent[i]! >= 0) hasChild[parent[i]!] = 1;
  }
  const leaves: number[] = [];
  for (let i = 0; i < nodes; i++) if (!hasChild[i]) leaves.push(i);
  return { parent, leaves: Int32Array.from(leaves) };
}
