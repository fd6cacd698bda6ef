// The policy version of each token of a training batch, in either layout: a call's CallInfo carries `versionRuns`
// when a weight update fell inside its answer (docs/weight-updates.md), runs over its trained (loss-mask 1) tokens in
// order; every other call's tokens have its `policyVersion`. Context tokens (call index -1) have none (null).
import type { TrainingBatch } from "./batch.ts";

export function tokenVersions(batch: TrainingBatch): Array<string | null> {
  const n = batch.tokenIds.length;
  const out = new Array<string | null>(n).fill(null);
  const rowOf = batch.tree ? (t: number) => batch.tree!.tokenRows[t]! : rowsLookup(batch.offsets);
  // A call's trained tokens counted in token order: per row in `rows` (each row its own copy), per call in `tree`
  // (every sampled token once, depth-first order keeps a call's tokens in order).
  const seen = new Map<string, number>();
  for (let t = 0; t < n; t++) {
    const c = batch.callIndex[t]!;
    if (c < 0) continue;
    const row = rowOf(t);
    const call = batch.rowInfo[row]?.calls[c];
    if (!call) continue;
    const runs = call.versionRuns;
    if (!runs?.length || batch.lossMask[t] !== 1) {
      out[t] = call.policyVersion;
      continue;
    }
    const key = batch.tree ? `${call.seq}` : `${row}:${call.seq}`;
    const k = seen.get(key) ?? 0;
    seen.set(key, k + 1);
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
