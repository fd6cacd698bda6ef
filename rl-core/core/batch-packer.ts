// Ready trajectories → training batches, packed back to back (ragged, no padding) up to a token budget.
// Rows are taken in the order their groups completed, in units that are never split: a rollout's rows (default),
// or a group's (`batchUnit: "group"`), so sequence- and group-level losses (GSPO's sequence ratio, rollout-level
// aggregation) can be computed from one batch. A unit longer than the budget is a batch of its own. A batch is built
// when the next unit would not fit, or when its oldest row has waited `batchTimeoutMs`. At build time advantages get
// their batch-level whitening (batch-advantages.ts), and per-token loss weights are computed for the loss
// aggregation with the *rollout* as the sequence, normalised by a global token count (`lossTokens`).
// A core following recorded decisions (a replay) builds the recorded batches instead, each once all its rollouts'
// rows are ready, with the recorded ids.
import type { NormalizeBy } from "../estimators/index.ts";
import { lossWeightsAsync, type LossAggMode } from "../kernels/index.ts";
import { bytesOf, concatTyped, float32s, int32s, uint8s } from "../../protocol/index.ts";
import { batchLevelAdvantages } from "./batch-advantages.ts";
import type { CoreStore, ReadyRow, StoredBatch } from "./core-store.ts";
import type { DecisionPlan } from "./decisions.ts";
import { estimatorSettingsProblem, type WhitenScope } from "./estimator-settings.ts";

export { indexStrings } from "./batch-advantages.ts";

export type BatchUnit = "rollout" | "group";
export const BATCH_UNITS: readonly BatchUnit[] = ["rollout", "group"];

export interface PackOptions {
  tokenBudget: number;
  batchTimeoutMs: number;
  normalize: NormalizeBy;
  lossAgg: LossAggMode;
  estimator: string;
  batchUnit?: BatchUnit;
  whitenScope?: WhitenScope;
  /** Dr.GRPO's constant L for seq-mean-token-sum-norm (e.g. the generation budget per rollout); required by it. */
  maxLen?: number;
  /** The global token count N loss weights are normalised by; 0: each batch its own (weights sum to 1). */
  lossTokens?: number;
  /** The core's current policy version, which each batch states when it is packed. */
  currentVersion?: () => string;
}

type BuildOptions = Omit<PackOptions, "tokenBudget" | "batchTimeoutMs">;

/**
 * Loss weights with the rollout as the sequence: the kernel is given rollout boundaries as rows (a rollout's rows are
 * contiguous in a batch). With N = lossTokens > 0 and T the batch's trained tokens, every mode is its per-batch
 * aggregation times T/N, so a batch counts in a step of N trained tokens by its trained tokens: token-mean weighs 1/N;
 * the seq-mean modes weigh as over S_N = S·N/T sequences (this batch's rollouts S at its rate per token, the
 * kernel's sequence count S becomes S·N/T). seq-mean-token-sum-norm is Dr.GRPO's: the mean over rollouts of each
 * rollout's token sum divided by the constant L = maxLen (Dr.GRPO's code: masked_sum with constant_normalizer =
 * generate_max_length, then the mean over the batch; verl's agg_loss divides the same by its sequence count
 * global_batch_size and loss_scale_factor), so 1/(S_N·L) per token — the seq-mean-token-sum kernel with S_N·L
 * sequences. Its weights sum to T/N · (T/S)/L: T/N when every rollout is L tokens long, less when shorter. (The
 * kernel's own seq-mean-token-sum-norm is verl's older per-micro-batch form, sum / L, which grows with the rollouts
 * per batch; it is not used here.)
 */
async function rolloutLossWeights(
  rows: readonly ReadyRow[],
  offsets: Int32Array,
  lossMask: Uint8Array,
  options: BuildOptions,
) {
  const bounds = [0];
  for (let r = 1; r < rows.length; r++) if (rows[r]!.rolloutId !== rows[r - 1]!.rolloutId) bounds.push(offsets[r]!);
  bounds.push(offsets[rows.length]!);
  const rolloutOffsets = Int32Array.from(rows.length ? bounds : [0]);
  let trained = 0;
  let rollouts = 0;
  for (let u = 0; u + 1 < rolloutOffsets.length; u++) {
    let c = 0;
    for (let t = rolloutOffsets[u]!; t < rolloutOffsets[u + 1]!; t++) c += lossMask[t]!;
    trained += c;
    rollouts += c > 0 ? 1 : 0;
  }
  const n = options.lossTokens ?? 0;
  const global = n > 0 && trained > 0;
  const sumNorm = options.lossAgg === "seq-mean-token-sum-norm";
  const maxLen = options.maxLen ?? 0;
  if (sumNorm && !(maxLen > 0))
    throw new Error(estimatorSettingsProblem({ estimator: "grpo", lossAgg: options.lossAgg, maxLen }) ?? "");
  // The sequences this batch's weights are taken over: its rollouts, or those of a step of N tokens at its rate.
  const seqs = global ? (rollouts * n) / trained : rollouts;
  const weights = await lossWeightsAsync({
    offsets: rolloutOffsets,
    mask: lossMask,
    mode: sumNorm ? "seq-mean-token-sum" : options.lossAgg,
    totalTokens: global && options.lossAgg === "token-mean" ? n : undefined,
    totalSeqs: sumNorm ? seqs * maxLen || undefined : global && options.lossAgg !== "token-mean" ? seqs : undefined,
  });
  return { weights, trained, rollouts: rolloutOffsets.length - 1 };
}

/**
 * The batch's routed experts (MoE routing replay), aligned with its tokens, when any row has them: uint16 when any
 * row's are, rows without routing (or of another shape, never expected: one model) left 0.
 */
function batchRouting(rows: readonly ReadyRow[], offsets: Int32Array): Partial<StoredBatch> {
  const first = rows.find((r) => r.routing)?.routing;
  if (!first) return {};
  const { layers, topK } = first;
  const width = layers * topK;
  const wide = rows.some((r) => r.routing?.dtype === "uint16");
  const values = wide ? new Uint16Array(offsets[rows.length]! * width) : new Uint8Array(offsets[rows.length]! * width);
  rows.forEach((r, i) => {
    const routing = r.routing;
    if (!routing || routing.layers !== layers || routing.topK !== topK) return;
    const at = offsets[i]! * width;
    if (routing.dtype === "uint8") values.set(routing.data, at);
    else values.set(new Uint16Array(routing.data.slice().buffer), at);
  });
  return {
    routedExperts: bytesOf(values),
    routedExpertsDtype: wide ? "uint16" : "uint8",
    moeLayers: layers,
    moeTopK: topK,
  };
}

export async function buildBatch(id: number, rows: readonly ReadyRow[], options: BuildOptions): Promise<StoredBatch> {
  const offsets = new Int32Array(rows.length + 1);
  rows.forEach((r, i) => (offsets[i + 1] = offsets[i]! + r.tokenIds.byteLength / 4));
  const tokenIds = concatTyped(
    Int32Array,
    rows.map((r) => int32s(r.tokenIds)),
  );
  const lossMask = concatTyped(
    Uint8Array,
    rows.map((r) => uint8s(r.lossMask)),
  );
  const logprobs = concatTyped(
    Float32Array,
    rows.map((r) => float32s(r.logprobs)),
  );
  const callIndex = concatTyped(
    Int32Array,
    rows.map((r) =>
      r.callIndex?.byteLength ? int32s(r.callIndex) : new Int32Array(r.tokenIds.byteLength / 4).fill(-1),
    ),
  );
  const advantages = await batchLevelAdvantages(
    offsets,
    lossMask,
    rows,
    concatTyped(
      Float32Array,
      rows.map((r) => float32s(r.advantages)),
    ),
    {
      estimator: options.estimator,
      whitenScope: options.whitenScope ?? "batch",
      normalize: options.normalize,
    },
  );
  const { weights, trained, rollouts } = await rolloutLossWeights(rows, offsets, lossMask, options);
  return {
    batchId: id,
    rows: rows.length,
    offsets: bytesOf(offsets),
    tokenIds: bytesOf(tokenIds),
    lossMask: bytesOf(lossMask),
    logprobs: bytesOf(logprobs),
    advantages: bytesOf(advantages),
    lossWeights: bytesOf(weights),
    callIndex: bytesOf(callIndex),
    ...batchRouting(rows, offsets),
    rowInfo: rows.map((r) => ({
      rolloutId: r.rolloutId,
      trajectoryId: r.trajectoryId,
      groupKey: r.groupKey,
      group: r.group,
      task: r.task,
      harness: r.harness,
      reward: r.reward,
      segment: r.segment,
      generation: r.generation ?? 0,
      round: r.round ?? 0,
      late: r.late ?? false,
      calls: r.calls ?? [],
      finishReason: r.finishReason ?? "",
      policyVersion: r.policyVersion ?? "",
      staleness: r.staleness ?? 0,
      staleTokens: r.staleTokens ?? 0,
      noSignal: r.signal !== "ok",
      signal: r.signal,
      context: r.context,
    })),
    estimator: options.estimator,
    normalize: options.normalize,
    lossAgg: options.lossAgg,
    batchUnit: options.batchUnit ?? "rollout",
    lossTokens: options.lossTokens ?? 0,
    tokens: tokenIds.length,
    trainedTokens: trained,
    groups: new Set(rows.map((r) => r.groupKey)).size,
    rollouts,
    createdAtMs: Date.now(),
    currentVersion: options.currentVersion?.() ?? "",
    maxStaleness: rows.reduce((m, r) => Math.max(m, r.staleness ?? 0), 0),
    staleTokens: rows.reduce((n, r) => n + (r.staleTokens ?? 0), 0),
  };
}

/** Rows that go into a batch together: one rollout's, or one group's. */
interface Unit {
  keys: number[];
  tokens: number;
  at: number;
}

export class BatchPacker {
  readonly #store: CoreStore;
  readonly #options: PackOptions;
  readonly #queue: Unit[] = [];

  /** A replay's recorded batch cuts (decisions.ts): the rows of their rollouts wait here for their batch. */
  readonly #plan: DecisionPlan | null;
  readonly #planned = new Map<string, number[]>();

  constructor(store: CoreStore, options: PackOptions, plan: DecisionPlan | null = null) {
    this.#store = store;
    this.#options = options;
    this.#plan = plan;
    const ready = store.readyKeys();
    this.add(
      ready.map((r) => r.key),
      ready,
    );
  }

  #unitOf(row: { rolloutId: string; groupKey: string }): string {
    return this.#options.batchUnit === "group" ? row.groupKey : row.rolloutId;
  }

  #enqueue(keys: readonly number[], tokens: readonly number[], units: readonly string[], at: number): void {
    for (let i = 0; i < keys.length; i++) {
      const last = this.#queue[this.#queue.length - 1];
      if (i > 0 && units[i] === units[i - 1] && last) {
        last.keys.push(keys[i]!);
        last.tokens += tokens[i]!;
      } else {
        this.#queue.push({ keys: [keys[i]!], tokens: tokens[i]!, at });
      }
    }
  }

  get readyRows(): number {
    let n = this.#queue.reduce((sum, u) => sum + u.keys.length, 0);
    for (const keys of this.#planned.values()) n += keys.length;
    return n;
  }

  /** A processed group's rows (in order: a rollout's rows together). */
  add(keys: readonly number[], rows: ReadonlyArray<{ tokens: number; rolloutId: string; groupKey: string }>): void {
    const queued: number[] = [];
    for (let i = 0; i < keys.length; i++) {
      const id = rows[i]!.rolloutId;
      if (!this.#plan?.isBatched(id)) queued.push(i);
      else if (this.#planned.has(id)) this.#planned.get(id)!.push(keys[i]!);
      else this.#planned.set(id, [keys[i]!]);
    }
    this.#enqueue(
      queued.map((i) => keys[i]!),
      queued.map((i) => rows[i]!.tokens),
      queued.map((i) => this.#unitOf(rows[i]!)),
      Date.now(),
    );
  }

  /** Recorded batches whose rollouts' rows are all here, built as they were cut, in recorded order. */
  async #packPlanned(built: StoredBatch[]): Promise<void> {
    for (let next = this.#plan?.peekBatch(); next; next = this.#plan!.peekBatch()) {
      if (!next.rollouts.every((id) => this.#planned.has(id))) return;
      const keys = next.rollouts.flatMap((id) => this.#planned.get(id)!);
      this.#store.useBatchId(next.batchId);
      const batch = await buildBatch(next.batchId, this.#store.getReady(keys), this.#options);
      await this.#store.commitBatch(batch, keys);
      for (const id of next.rollouts) this.#planned.delete(id);
      this.#plan!.shiftBatch();
      built.push(batch);
    }
  }

  /** Builds every batch that is due; `flush` also builds a partial one. Not re-entrant (the core serializes it). */
  async pack(options: { flush?: boolean } = {}): Promise<StoredBatch[]> {
    const built: StoredBatch[] = [];
    await this.#packPlanned(built);
    const { tokenBudget, batchTimeoutMs } = this.#options;
    while (this.#queue.length > 0) {
      let n = 1;
      let total = this.#queue[0]!.tokens;
      while (n < this.#queue.length && total + this.#queue[n]!.tokens <= tokenBudget) total += this.#queue[n++]!.tokens;
      const full = n < this.#queue.length || total >= tokenBudget;
      const due = Date.now() - this.#queue[0]!.at >= batchTimeoutMs;
      if (!full && !due && !options.flush) break;
      const keys = this.#queue.slice(0, n).flatMap((u) => u.keys);
      const batch = await buildBatch(this.#store.nextBatchId(), this.#store.getReady(keys), this.#options);
      await this.#store.commitBatch(batch, keys);
      this.#queue.splice(0, n);
      built.push(batch);
    }
    return built;
  }
}
