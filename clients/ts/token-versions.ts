// The policy version of each token of a training batch, in either layout: a call's CallInfo carries `versionRuns`
// when a weight update fell inside its answer (docs/weight-updates.md), runs over its trained (loss-mask 1) tokens in
// order; every other call's tokens have its `policyVersion`. Context tokens (call index -1) have none (null).
import type { CallInfo } from "../../protocol/index.ts";
import type { TrainingBatch } from "./batch.ts";

export function tokenVersions(batch: TrainingBatch): Array<string | null> {
  const rowOf = batch.tree ? (t: number) => batch.tree!.tokenRows[t]! : rowsLookup(batch.offsets);
  // A call's runs are over its trained tokens in the row that trains them (the core writes them so per row): in
  // `tree` a trained token's row is the one it takes its fields from, and depth-first order keeps its tokens in order.
  return versionsByCall(batch.tokenIds.length, batch.lossMask, (t) => {
    const c = batch.callIndex[t]!;
    if (c < 0) return null;
    const row = rowOf(t);
    const call = batch.rowInfo[row]?.calls[c];
    return call ? { call, key: `${row}:${c}` } : null;
  });
}

/**
 * The version of each of `n` tokens (visited in order), given each token's call (null: context) and the key its call's
 * trained tokens are counted under (the runs' `start` counts them).
 */
export function versionsByCall(
  n: number,
  lossMask: ArrayLike<number>,
  callAt: (t: number) => { call: CallInfo; key: string } | null,
): Array<string | null> {
  const out = new Array<string | null>(n).fill(null);
  const seen = new Map<string, number>();
  for (let t = 0; t < n; t++) {
    const at = callAt(t);
    if (!at) continue;
    const runs = at.call.versionRuns;
    if (!runs?.length || lossMask[t] !== 1) {
      out[t] = at.call.policyVersion;
      continue;
    }
    const k = seen.get(at.key) ?? 0;
    seen.set(at.key, k + 1);
    let version = runs[0]!.version;
    for (const run of runs) if (run.start <= k) version = run.version;
    out[t] = version;
  }
  return out;
}

function rowsLookup(offsets: Int32Array): (t: number) => number {
  let row = 0;
  // Tokens are visited in order: the row only moves forward.
  return (t) => {
    while (row + 1 < offsets.length - 1 && t >= offsets[row + 1]!) row++;
    return row;
  };
}
