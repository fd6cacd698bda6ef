// The sim's mixture-of-experts router: deterministic experts for every token position a forward pass processes, from
// the seed, the position, the token and the token before it (a real router depends on the context; this one on a
// little of it, enough that the same token routes differently in different places). Answered the way each server
// answers (vLLM: choices[].routed_experts, base64 .npy; SGLang: sglext.routed_experts, base64 int32), so routing
// replay is tested over real round trips. Tests use `routeToken` as the oracle of what the sim routed.
import { encodeNpy, dtypeForExperts } from "../util/routed-experts.ts";
import { mix } from "./hash.ts";

export interface MoeOptions {
  layers: number;
  topK: number;
  experts: number;
}

export function checkMoe(moe: MoeOptions): MoeOptions {
  for (const [name, value] of Object.entries(moe))
    if (!Number.isInteger(value) || value < 1) throw new RangeError(`moe ${name} must be a positive integer`);
  if (moe.topK > moe.experts) throw new RangeError(`moe top_k (${moe.topK}) exceeds the experts (${moe.experts})`);
  if (moe.experts > 65536) throw new RangeError(`moe experts (${moe.experts}) exceeds 65536`);
  return moe;
}

/** The experts (layers × topK, distinct within a layer) of the token at `position`, preceded by `previous` (-1: none). */
export function routeToken(
  seed: number,
  moe: MoeOptions,
  position: number,
  token: number,
  previous: number,
  out: number[] = [],
): number[] {
  out.length = 0;
  for (let layer = 0; layer < moe.layers; layer++) {
    const h = mix(seed, 0x3e3, position, token, previous, layer);
    const first = h % moe.experts;
    for (let k = 0; k < moe.topK; k++) out.push((first + k) % moe.experts);
  }
  return out;
}

/** Rows for positions [from, to) of `ids`, as int32 values [rows, layers, topK]. */
export function routingRows(
  seed: number,
  moe: MoeOptions,
  ids: readonly number[],
  from: number,
  to: number,
): Int32Array {
  const width = moe.layers * moe.topK;
  const out = new Int32Array(Math.max(0, to - from) * width);
  const row: number[] = [];
  for (let p = from; p < to; p++) {
    routeToken(seed, moe, p, ids[p]!, p === 0 ? -1 : ids[p - 1]!, row);
    out.set(row, (p - from) * width);
  }
  return out;
}

/**
 * vLLM's `routed_experts`: rows for every position a forward pass processed (prompt ++ sampled ids but the last),
 * np.save'd as uint8 (≤ 256 experts) or uint16, base64.
 */
export function vllmRoutedExperts(seed: number, moe: MoeOptions, promptIds: number[], sampled: number[]): string {
  const ids = [...promptIds, ...sampled];
  const rows = Math.max(0, ids.length - 1);
  const values = routingRows(seed, moe, ids, 0, rows);
  const uint8 = dtypeForExperts(moe.experts) === "uint8";
  const data = uint8 ? Uint8Array.from(values) : new Uint8Array(Uint16Array.from(values).buffer);
  const npy = encodeNpy({ descr: uint8 ? "|u1" : "<u2", shape: [rows, moe.layers, moe.topK], data });
  return Buffer.from(npy).toString("base64");
}

/** SGLang's `routed_experts`: int32 rows for positions [start, seqlen − 1), base64. */
export function sglangRoutedExperts(
  seed: number,
  moe: MoeOptions,
  promptIds: number[],
  sampled: number[],
  start: number,
): string {
  const ids = [...promptIds, ...sampled];
  const values = routingRows(seed, moe, ids, start, Math.max(start, ids.length - 1));
  return Buffer.from(values.buffer, values.byteOffset, values.byteLength).toString("base64");
}
