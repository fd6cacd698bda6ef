// A trainer's logprob reports (ReportLogprobs): the policy's recomputed logprobs give consistency figures per
// harness (and truncated importance weights on request); the reference policy's are kept with the batch until its
// ack, for KL per row and, with the core's --kl-coef, the batch's advantages with KL in the reward.
import type { NormalizeBy } from "../estimators/index.ts";
import { importanceWeightsAsync, klDivergenceAsync, KL_KINDS, type KlKind } from "../kernels/index.ts";
import {
  bytesOf,
  float32s,
  int32s,
  LinkError,
  uint8s,
  type Consistency,
  type ConsistencyReport,
  type LogprobReport,
  type RowKl,
} from "../../protocol/index.ts";
import type { BatchLeases } from "./batch-leases.ts";
import { consistencyFigures } from "./consistency.ts";
import type { StoredBatch } from "./core-store.ts";
import type { Singleton, WhitenScope } from "./estimator-settings.ts";
import { servedAdvantages } from "./served-advantages.ts";
import type { ServedBatches } from "./served-batches.ts";
import { rowsToTree } from "./tree-layout.ts";

const EMPTY = Buffer.alloc(0);

export interface LogprobReportsOptions {
  onConsistency?(figures: Consistency[], batchId: number): void;
  whitenScope?: WhitenScope;
  singleton?: Singleton;
  /**
   * KL in the reward of served batches (the core's --kl-coef > 0): the reply to a ref report carries the batch's
   * advantages recomputed by the core's estimator and settings with −klCoef · KL(policy ‖ ref) in the reward.
   */
  klReward?: { klCoef: number; klKind: KlKind; estimator: string; normalize: NormalizeBy; gamma: number };
}

/** Per-row means of a KL estimator over the row's trained tokens. */
async function rowKl(batch: StoredBatch, policy: Float32Array, ref: Float32Array): Promise<RowKl[]> {
  const offsets = int32s(batch.offsets);
  const mask = uint8s(batch.lossMask);
  const byKind = await Promise.all(
    KL_KINDS.map((kind) => klDivergenceAsync({ logp: policy, logpRef: ref, mask, kind })),
  );
  const out: RowKl[] = [];
  for (let r = 0; r < batch.rows; r++) {
    const sums = [0, 0, 0];
    let tokens = 0;
    for (let t = offsets[r]!; t < offsets[r + 1]!; t++) {
      if (!mask[t]) continue;
      tokens++;
      for (let k = 0; k < 3; k++) sums[k] = sums[k]! + byKind[k]![t]!;
    }
    const mean = (k: number) => (tokens ? sums[k]! / tokens : 0);
    out.push({ row: r, tokens, k1: mean(0), k2: mean(1), k3: mean(2) });
  }
  return out;
}

/** A trainer's per-token logprobs for a batch: one per token, finite where the mask is 1. */
function trainerLogprobs(bytes: Uint8Array, batch: StoredBatch, what: string): Float32Array {
  const values = float32s(bytes, what);
  const mask = uint8s(batch.lossMask);
  if (values.length !== mask.length)
    throw new LinkError(
      "RLGATE_BAD_REQUEST",
      `${what} has ${values.length} entries, the batch has ${mask.length} tokens`,
    );
  for (let t = 0; t < mask.length; t++) {
    if (mask[t] && !Number.isFinite(values[t]!))
      throw new LinkError(
        "RLGATE_BAD_REQUEST",
        `${what}[${t}] is ${values[t]} on a trained token: logprobs must be finite`,
      );
  }
  return values;
}

export class LogprobReports {
  readonly #batches: ServedBatches;
  readonly #leases: BatchLeases;
  readonly #options: LogprobReportsOptions;

  constructor(batches: ServedBatches, leases: BatchLeases, options: LogprobReportsOptions) {
    this.#batches = batches;
    this.#leases = leases;
    this.#options = options;
  }

  async report(req: LogprobReport): Promise<ConsistencyReport> {
    const batch = this.#batches.get(req.batchId);
    const kind = req.kind || "policy";
    if (kind !== "policy" && kind !== "ref")
      throw new LinkError("RLGATE_BAD_REQUEST", `kind must be policy or ref, not '${kind}'`);
    const asRows = this.#batches.asRows(batch, req.logprobs, "logprobs");
    const trainer = trainerLogprobs(bytesOf(asRows.values), batch, "logprobs");
    const inLayout = (x: Float32Array) => (asRows.tree ? rowsToTree(asRows.tree, x) : x);
    const rollout = float32s(batch.logprobs);
    const lossMask = uint8s(batch.lossMask);
    const reported = this.#batches.reported.get(req.batchId) ?? {};
    reported[kind] = trainer;
    this.#batches.reported.set(req.batchId, reported);
    let harnesses: Consistency[] = [];
    let importance: Uint8Array = EMPTY;
    if (kind === "policy") {
      harnesses = consistencyFigures({
        offsets: int32s(batch.offsets),
        lossMask,
        rollout,
        trainer,
        harness: batch.rowInfo.map((r) => r.harness),
      });
      this.#options.onConsistency?.(harnesses, req.batchId);
      if (req.importanceCap > 0) {
        importance = bytesOf(
          inLayout(
            await importanceWeightsAsync({
              logpOld: trainer,
              logpRollout: rollout,
              mask: lossMask,
              cap: req.importanceCap,
            }),
          ),
        );
      }
    }
    const kl = reported.ref ? await rowKl(batch, reported.policy ?? rollout, reported.ref) : [];
    // KL in the reward: the batch's advantages again, by the core's estimator and settings, with −β·KL per token in
    // the reward (every report once the ref logprobs are in, with the latest policy logprobs, as row_kl).
    const klReward = this.#options.klReward;
    let klAdvantages: Uint8Array = EMPTY;
    if (reported.ref && klReward && klReward.klCoef > 0) {
      const { advantages } = await servedAdvantages(
        batch,
        {
          estimator: klReward.estimator,
          normalize: klReward.normalize,
          whitenScope: this.#options.whitenScope ?? "batch",
          gamma: klReward.gamma,
          singleton: this.#options.singleton ?? "zero",
        },
        await this.klTokenRewards(batch, klReward.klCoef, klReward.klKind),
      );
      klAdvantages = bytesOf(inLayout(advantages));
    }
    const acked = req.ack ? (await this.#leases.ack([req.batchId])) > 0 : false;
    return { batchId: req.batchId, harnesses, importanceWeights: importance, acked, rowKl: kl, klAdvantages };
  }

  /** −coef · KL(policy ‖ ref) per token (0 on mask-0 tokens) of a batch whose ref logprobs were reported. */
  async klTokenRewards(served: StoredBatch, coef: number, kind: KlKind): Promise<Float32Array> {
    const reported = this.#batches.reported.get(served.batchId);
    if (!reported?.ref)
      throw new LinkError(
        "RLGATE_BAD_REQUEST",
        "kl_coef needs a served batch whose ref logprobs were reported (ReportLogprobs kind ref)",
      );
    const policy = reported.policy ?? float32s(served.logprobs);
    const kl = await klDivergenceAsync({ logp: policy, logpRef: reported.ref, mask: uint8s(served.lossMask), kind });
    return kl.map((x) => -coef * x);
  }
}
