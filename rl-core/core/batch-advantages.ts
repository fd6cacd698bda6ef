// What happens to advantages at the level of a training batch, in one place for the batches the core builds and for
// advantages asked for over a served batch (ComputeAdvantages), so both give the same numbers:
//   1. REINFORCE++ / REINFORCE++-baseline with whitening scope `batch` (the references' choice): whitened over the
//      batch's trained tokens (REINFORCE++-baseline leaves out rollouts without a baseline, alone in their group);
//   2. `--normalize`: whitened per batch / task / harness, rows whose group gave them no signal kept at 0.
import { normalizeAdvantagesAsync, type NormalizeBy } from "../estimators/index.ts";
import { maskedWhitenAsync } from "../kernels/index.ts";
import type { RowSignal } from "./core-store.ts";
import type { WhitenScope } from "./estimator-settings.ts";

export interface BatchRowMeta {
  task: string;
  harness: string;
  reward: number;
  signal: RowSignal;
  groupKey: string;
}

export interface BatchAdvantageOptions {
  estimator: string;
  whitenScope: WhitenScope;
  normalize: NormalizeBy;
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

/** Rows whose every trained token has advantage 0. */
function zeroRows(offsets: Int32Array, mask: Uint8Array, advantages: Float32Array): Uint8Array {
  const out = new Uint8Array(offsets.length - 1);
  for (let r = 0; r < out.length; r++) {
    let zero = 1;
    for (let t = offsets[r]!; t < offsets[r + 1]! && zero; t++) if (mask[t] && advantages[t] !== 0) zero = 0;
    out[r] = zero;
  }
  return out;
}

export async function batchLevelAdvantages(
  offsets: Int32Array,
  lossMask: Uint8Array,
  rows: readonly BatchRowMeta[],
  advantages: Float32Array,
  options: BatchAdvantageOptions,
): Promise<Float32Array> {
  if (
    options.whitenScope === "batch" &&
    (options.estimator === "reinforce++-baseline" || options.estimator === "reinforce++")
  ) {
    const baselineOnly = options.estimator === "reinforce++-baseline";
    const rowSegment = Int32Array.from(rows, (r) => (baselineOnly && r.signal === "none" ? -1 : 0));
    advantages = await maskedWhitenAsync({ offsets, x: advantages, mask: lossMask, rowSegment, numSegments: 1 });
  }
  if (options.normalize !== "none") {
    const zero = zeroRows(offsets, lossMask, advantages);
    const batch = {
      offsets,
      lossMask,
      rewards: Float64Array.from(rows, (r) => r.reward),
      taskIds: indexStrings(rows.map((r) => r.task)),
      harnessIds: indexStrings(rows.map((r) => r.harness)),
      // "No baseline → 0" survives normalisation: a row its group gave no signal is not whitened into one.
      noSignal: Uint8Array.from(rows, (r, i) => (r.signal !== "ok" && zero[i] ? 1 : 0)),
    };
    advantages = await normalizeAdvantagesAsync(batch, advantages, options.normalize);
  }
  return advantages;
}
