// How well two engines agree on the logprobs of the same sampled tokens: Pearson r, k3 KL and |Δlogp| percentiles.
// The one definition: rl-core's training–inference consistency (rl-core/core/consistency.ts, the wire's Consistency)
// and a replay's scores (replay/score.ts) are both computed here, so they read the same way.

export interface Agreement {
  tokens: number;
  /** NaN with fewer than two tokens or no spread on either side. */
  pearson: number;
  /** Mean k3 estimate of KL(reference ‖ other): exp(d) − d − 1, d = clamp(other − reference, −20, 20). */
  k3Kl: number;
  absDiffMean: number;
  absDiffP50: number;
  absDiffP99: number;
  absDiffMax: number;
}

/** numpy.percentile's default (linear interpolation) over sorted values. */
export function percentile(sorted: ArrayLike<number>, q: number): number {
  if (sorted.length === 0) return NaN;
  const at = (q / 100) * (sorted.length - 1);
  const lo = Math.floor(at);
  const hi = Math.min(sorted.length - 1, lo + 1);
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (at - lo);
}

/** The k3 estimator of one token, as the native kernels compute it. */
export function k3(reference: number, other: number): number {
  const d = Math.max(-20, Math.min(20, other - reference));
  return Math.exp(d) - d - 1;
}

export interface AgreementOptions {
  /** The token indexes to count, in this order (default: every index). */
  tokens?: ArrayLike<number>;
  /** Each token's k3 as already computed (rl-core's kernels, float32); default: k3() of the pair here. */
  k3?: ArrayLike<number>;
}

/** Agreement over token pairs; pairs where either value is not finite are left out. */
export function agreement(
  reference: ArrayLike<number>,
  other: ArrayLike<number>,
  options: AgreementOptions = {},
): Agreement {
  if (reference.length !== other.length)
    throw new RangeError(`${reference.length} reference logprobs against ${other.length}`);
  const { tokens, k3: k3s } = options;
  const count = tokens ? tokens.length : reference.length;
  let n = 0,
    sx = 0,
    sy = 0,
    sxx = 0,
    syy = 0,
    sxy = 0,
    sk = 0;
  const diff = new Float64Array(count);
  for (let i = 0; i < count; i++) {
    const t = tokens ? tokens[i]! : i;
    const x = reference[t]!;
    const y = other[t]!;
    if (!Number.isFinite(x) || !Number.isFinite(y)) continue;
    sx += x;
    sy += y;
    sxx += x * x;
    syy += y * y;
    sxy += x * y;
    sk += k3s ? k3s[t]! : k3(x, y);
    diff[n++] = Math.abs(y - x);
  }
  const sorted = diff.subarray(0, n).sort();
  let sd = 0;
  for (let i = 0; i < n; i++) sd += sorted[i]!;
  const cov = sxy - (sx * sy) / n;
  const vx = sxx - (sx * sx) / n;
  const vy = syy - (sy * sy) / n;
  return {
    tokens: n,
    // Undefined with no spread: NaN then (both constant and equal is still perfect agreement in p50/p99).
    pearson: n >= 2 && vx > 0 && vy > 0 ? cov / Math.sqrt(vx * vy) : NaN,
    k3Kl: n ? sk / n : NaN,
    absDiffMean: n ? sd / n : NaN,
    absDiffP50: percentile(sorted, 50),
    absDiffP99: percentile(sorted, 99),
    absDiffMax: n ? sorted[n - 1]! : NaN,
  };
}
