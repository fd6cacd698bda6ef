// Ready trajectories → training batches, packed back to back (ragged, no padding) up to a token budget.
// Rows are taken in the order their groups completed and never split; a row longer than the budget is a batch
// of its own. A batch is built when the next row would not fit, or when its oldest row has waited
// `batchTimeoutMs`. At build time advantages are optionally whitened per batch / task / harness, and
// per-token loss weights are computed for the chosen loss aggregation.
import { normalizeAdvantagesAsync, type NormalizeBy } from "../estimators/index.ts";
import { lossWeightsAsync, type LossAggMode } from "../kernels/index.ts";
import { bytesOf, concatTyped, float32s, int32s, uint8s } from "../../protocol/index.ts";
import type { CoreStore, ReadyRow, StoredBatch } from "./core-store.ts";

export interface PackOptions {
  tokenBudget: number;
  batchTimeoutMs: number;
  normalize: NormalizeBy;
  lossAgg: LossAggMode;
  estimator: string;
}

/** Small integer ids for strings, in order of first appearance. */
export function indexStrings(values: readonly string[]): Int32Array {
  const ids = new Map<string, number>();
  return Int32Array.from(values, (v) => {
    let id = ids.get(v);
    if (id === undefined) ids.set(v, (id = ids.size));
    return id;
  });
}

export async function buildBatch(id: number, rows: readonly ReadyRow[], options: Omit<PackOptions, "tokenBudget" | "batchTimeoutMs">): Promise<StoredBatch> {
  const offsets = new Int32Array(rows.length + 1);
  rows.forEach((r, i) => (offsets[i + 1] = offsets[i]! + r.tokenIds.byteLength / 4));
  const tokenIds = concatTyped(Int32Array, rows.map((r) => int32s(r.tokenIds)));
  const lossMask = concatTyped(Uint8Array, rows.map((r) => uint8s(r.lossMask)));
  const logprobs = concatTyped(Float32Array, rows.map((r) => float32s(r.logprobs)));
  let advantages = concatTyped(Float32Array, rows.map((r) => float32s(r.advantages)));
  if (options.normalize !== "none") {
    const batch = {
      offsets,
      lossMask,
      rewards: Float64Array.from(rows, (r) => r.reward),
      taskIds: indexStrings(rows.map((r) => r.task)),
      harnessIds: indexStrings(rows.map((r) => r.harness)),
    };
    advantages = await normalizeAdvantagesAsync(batch, advantages, options.normalize);
  }
  const weights = await lossWeightsAsync({ offsets, mask: lossMask, mode: options.lossAgg });
  let trained = 0;
  for (let t = 0; t < lossMask.length; t++) trained += lossMask[t]!;
  return {
    batchId: id,
    rows: rows.length,
    offsets: bytesOf(offsets),
    tokenIds: bytesOf(tokenIds),
    lossMask: bytesOf(lossMask),
    logprobs: bytesOf(logprobs),
    advantages: bytesOf(advantages),
    lossWeights: bytesOf(weights),
    rowInfo: rows.map((r) => ({
      rolloutId: r.rolloutId,
      trajectoryId: r.trajectoryId,
      groupKey: r.groupKey,
      group: r.group,
      task: r.task,
      harness: r.harness,
      reward: r.reward,
      segment: r.segment,
    })),
    estimator: options.estimator,
    normalize: options.normalize,
    lossAgg: options.lossAgg,
    tokens: tokenIds.length,
    trainedTokens: trained,
    groups: new Set(rows.map((r) => r.groupKey)).size,
    createdAtMs: Date.now(),
  };
}

export class BatchPacker {
  readonly #store: CoreStore;
  readonly #options: PackOptions;
  readonly #queue: Array<{ key: number; tokens: number; at: number }> = [];

  constructor(store: CoreStore, options: PackOptions) {
    this.#store = store;
    this.#options = options;
    const now = Date.now();
    for (const { key, tokens } of store.readyKeys()) this.#queue.push({ key, tokens, at: now });
  }

  get readyRows(): number {
    return this.#queue.length;
  }

  add(keys: readonly number[], tokens: readonly number[]): void {
    const now = Date.now();
    keys.forEach((key, i) => this.#queue.push({ key, tokens: tokens[i]!, at: now }));
  }

  /** Builds every batch that is due; `flush` also builds a partial one. Not re-entrant (the core serializes it). */
  async pack(options: { flush?: boolean } = {}): Promise<StoredBatch[]> {
    const built: StoredBatch[] = [];
    const { tokenBudget, batchTimeoutMs } = this.#options;
    while (this.#queue.length > 0) {
      let n = 1;
      let total = this.#queue[0]!.tokens;
      while (n < this.#queue.length && total + this.#queue[n]!.tokens <= tokenBudget) total += this.#queue[n++]!.tokens;
      const full = n < this.#queue.length || total >= tokenBudget;
      const due = Date.now() - this.#queue[0]!.at >= batchTimeoutMs;
      if (!full && !due && !options.flush) break;
      const taken = this.#queue.slice(0, n);
      const keys = taken.map((q) => q.key);
      const batch = await buildBatch(this.#store.nextBatchId(), this.#store.getReady(keys), this.#options);
      await this.#store.commitBatch(batch, keys);
      this.#queue.splice(0, n);
      built.push(batch);
    }
    return built;
  }
}
