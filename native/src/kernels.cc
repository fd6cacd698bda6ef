// CPU implementations of the kernels declared in kernels.h, and the CPU/CUDA dispatch.
// Arithmetic follows rl-core/kernels/reference.ts (double accumulators, float stores, no FMA contraction:
// -ffp-contract=off), so native and reference agree to rounding, except where speed asked for a different
// order or precision, each said where it is: the blocked GAE scan and whitening statistics (summation
// order, ~1e-16 relative in double), and exp in float for importance weights and k3 KL (error bounds at
// ImportanceRange and k3_f32). The hot loops are compiled per instruction set (vec_math.h).
#include "kernels.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "cuda_loader.h"
#include "parallel.h"
#include "vec_math.h"

namespace rlgate {

int simd_isa() {
  static const int isa = [] {
    int best = kIsaBase;
#if RLG_HAVE_ISA_VERSIONS
    __builtin_cpu_init();
    // The features of x86-64-v3 / -v4 the compiled code can use (libgcc also checks that the OS saves the
    // ymm / zmm registers).
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi2")) {
      best = kIsaAvx2;
      if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
          __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
          __builtin_cpu_supports("avx512cd")) {
        best = kIsaAvx512;
      }
    }
#endif
    // RLGATE_SIMD caps it, so tests can run every version on one machine.
    const char* cap = std::getenv("RLGATE_SIMD");
    if (cap != nullptr && std::strcmp(cap, "avx2") == 0) best = std::min(best, static_cast<int>(kIsaAvx2));
    if (cap != nullptr && std::strcmp(cap, "base") == 0) best = kIsaBase;
    return best;
  }();
  return isa;
}

int hardware_threads() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

int check_offsets(const int32_t* offsets, int64_t rows, int64_t tokens) {
  if (rows < 0 || offsets == nullptr) return RLG_BAD_ARGUMENT;
  if (offsets[0] != 0) return RLG_BAD_OFFSETS;
  for (int64_t r = 0; r < rows; ++r) {
    if (offsets[r + 1] < offsets[r]) return RLG_BAD_OFFSETS;
  }
  return offsets[rows] == tokens ? RLG_OK : RLG_BAD_OFFSETS;
}

namespace {

const CudaApi* cuda_or_null() {
  const CudaApi* api = cuda_api();
  return api != nullptr && cuda_device_count() > 0 ? api : nullptr;
}

int threads_for(const Exec& e, int64_t work) {
  return clamp_threads(e.threads <= 0 ? hardware_threads() : e.threads, work);
}

// ---- GAE: a blocked scan, W tokens per step in SIMD lanes ----
//
// Per row, backwards over mask-1 tokens only: A_t = delta_t + gl * A(t'), delta_t = r_t + gamma * V(t') - V_t,
// with t' the next mask-1 token. Done token by token this is one chain of dependent multiplies and adds per
// row, latency-bound at ~700 Mtokens/s even with two rows interleaved. Instead each block of W tokens (8
// with AVX-512) is solved in the lanes of one vector, without its carry-in:
//   * V(t') within the block is a "fill from the right" scan over mask-1 lanes;
//   * A is the affine recurrence A_i = b_i + a_i * A_{i+1} with (a, b) = (gl, delta) on mask-1 lanes and
//     (1, 0) on mask-0 ones (they carry A through unchanged);
// both by a log-step (Kogge-Stone) scan: log2(W) steps of "combine with the lane 1, 2, 4 to the right".
// The block's last mask-1 lane j is the only one whose t' lies in the blocks after; it is given a = 1 and
// V(t') = 0 in the scan, and the carry X = gamma * V(t') + gl * A(t') enters afterwards: A_i = b_i + a_i * X.
// So only that last multiply-add and a scalar update of the carries wait for the previous block, and the
// out-of-order core overlaps the blocks (with the carry applied inside the scan, ~45 dependent operations
// per block, it ran no faster than the token loop).
// Doubles as the reference; only the summation order differs (~1e-16 relative, far below float rounding).
namespace gae {

constexpr int64_t kPrefetchTokens = 256;  // software prefetch distance (1 KiB of floats) ahead of the scan

struct Carry {
  double next_value;  // V of the first mask-1 token after the block (0 past the row's end)
  double adv;         // A of that token (0 past the row's end)
};

struct Pointers {
  const float* __restrict rewards;
  const float* __restrict values;
  const uint8_t* __restrict mask;
  float* __restrict out_adv;
  float* __restrict out_ret;
};

#if RLG_VECTOR_EXT
// Per call: gl^(W-1-i) in lane i (the suffix products of a block whose lanes are all mask 1), gl^1,2,4 (its
// scan steps) and the factors of its carry update.
template <int W>
struct Consts {
  double gamma, gl, gl2, gl4;
  typename Vec<W>::d suffix;
  double carry_v, carry_a;  // gl^(W-1) * gamma and gl^W
  Consts(double g, double l) : gamma(g), gl(g * l), gl2(gl * gl), gl4(gl2 * gl2) {
    double pw = 1.0;
    for (int i = W - 1; i >= 0; --i) {
      suffix[i] = pw;
      pw *= gl;
    }
    carry_v = suffix[0] * gamma;
    carry_a = suffix[0] * gl;
  }
};

// One block [t0, t0 + W) given the carry from the tokens after it; returns the carry for the block before.
template <int W, bool HasRewards>
RLG_INLINE Carry block(const Pointers& p, int64_t t0, Carry c, const Consts<W>& k) {
  using Vd = typename Vec<W>::d;
  using Vi = typename Vec<W>::i;
  const Vd zero = {};
  const Vd one = zero + 1.0;
  const Vi none = {};
  const uint64_t bytes = mask_bytes<W>(p.mask + t0);
  // Runs of context and of sampled tokens are long (hundreds of tokens), so most blocks are all mask 0
  // (nothing to compute) or all mask 1 (every lane's coefficient is gl: constant steps and suffix
  // products). Both skip most of the shuffles of the general scan, the bottleneck.
  if (bytes == 0) {
    store_f32<W>(p.out_adv + t0, zero);
    store_f32<W>(p.out_ret + t0, zero);
    return c;
  }
  const Vd v = load_f32<W>(p.values + t0);
  Vd r = zero;
  if constexpr (HasRewards) r = load_f32<W>(p.rewards + t0);
  const double x = k.gamma * c.next_value + k.gl * c.adv;  // the carry, entering at the last mask-1 lane
  if (all_nonzero<W>(bytes)) {
    Vd b = (r + k.gamma * up<1>(v, zero)) - v;
    b = b + k.gl * up<1>(b, zero);
    if constexpr (W > 2) b = b + k.gl2 * up<2>(b, zero);
    if constexpr (W > 4) b = b + k.gl4 * up<4>(b, zero);
    const Vd adv = b + k.suffix * x;
    store_f32<W>(p.out_adv + t0, adv);
    store_f32<W>(p.out_ret + t0, adv + v);
    return {v[0], (b[0] + k.carry_v * c.next_value) + k.carry_a * c.adv};
  }

  const Vi on = mask_lanes<W>(bytes);
  // Fill from the right: nvi[i] = V of the first mask-1 lane >= i, where found[i].
  Vd nvi = on ? v : zero;
  Vi found = on;
  nvi = found ? nvi : up<1>(nvi, zero);
  found |= up<1>(found, none);
  if constexpr (W > 2) {
    nvi = found ? nvi : up<2>(nvi, zero);
    found |= up<2>(found, none);
  }
  if constexpr (W > 4) {
    nvi = found ? nvi : up<4>(nvi, zero);
    found |= up<4>(found, none);
  }
  const Vi inner = on & up<1>(found, none);  // mask-1 lanes with a mask-1 lane after them in the block

  // (a, b) of each lane; the last mask-1 lane gets a = 1, b = r - v (V(t') and A(t') come with x).
  const Vd delta = (r + k.gamma * up<1>(nvi, zero)) - v;
  Vd ca = inner ? zero + k.gl : one;
  Vd cb = on ? delta : zero;
  cb = cb + ca * up<1>(cb, zero);
  ca = ca * up<1>(ca, one);
  if constexpr (W > 2) {
    cb = cb + ca * up<2>(cb, zero);
    ca = ca * up<2>(ca, one);
  }
  if constexpr (W > 4) {
    cb = cb + ca * up<4>(cb, zero);
    ca = ca * up<4>(ca, one);
  }

  const Vd adv = cb + ca * x;
  store_f32<W>(p.out_adv + t0, on ? adv : zero);
  store_f32<W>(p.out_ret + t0, on ? adv + v : zero);
  // Carry out: the block's first mask-1 lane. The A part is rewritten as (b + a gamma V) + (a gl) A so
  // that the chain from one block's A to the next is one multiply and one add.
  return {nvi[0], (cb[0] + ca[0] * k.gamma * c.next_value) + (ca[0] * k.gl) * c.adv};
}
#endif  // RLG_VECTOR_EXT

// A row's outcome reward enters at its last mask-1 token L; every token after L is mask 0 (output 0). So
// that the blocks never look for L, the tail from L to the row's end is done first, one token at a time,
// and the blocks run with the carry it leaves (and without a rewards array when there are only row rewards:
// 4 bytes a token fewer to read).
struct RowTail {
  int64_t t;  // where the blocks continue (L, or the row's start when it has no mask-1 token)
  Carry carry;
};

RLG_INLINE RowTail credit_row_reward(const Pointers& p, int64_t b, int64_t e, double reward) {
  int64_t t = e;
  while (t > b && p.mask[t - 1] == 0) --t;
  std::fill(p.out_adv + t, p.out_adv + e, 0.0f);
  std::fill(p.out_ret + t, p.out_ret + e, 0.0f);
  if (t == b) return {t, {0.0, 0.0}};
  --t;
  const double v = p.values[t];
  const double r = (p.rewards != nullptr ? static_cast<double>(p.rewards[t]) : 0.0) + reward;
  const double adv = r - v;  // delta with V(t') = 0 and A(t') = 0: nothing of the row follows L
  p.out_adv[t] = static_cast<float>(adv);
  p.out_ret[t] = static_cast<float>(adv + v);
  return {t, {v, adv}};
}

struct Rows {
  template <int W, bool HasRewards>
  RLG_INLINE static void rows(const GaeArgs* a, int64_t rb, int64_t re) {
    const double gamma = a->gamma;
    const double gl = a->gamma * a->lambda;
    const Pointers p{a->rewards, a->values, a->mask, a->out_advantages, a->out_returns};
#if RLG_VECTOR_EXT
    const Consts<W> k(gamma, a->lambda);
#endif
    for (int64_t row = rb; row < re; ++row) {
      const int64_t b = a->offsets[row];
      int64_t t = a->offsets[row + 1];
      Carry c{0.0, 0.0};
      if (a->row_rewards != nullptr) {
        const RowTail tail = credit_row_reward(p, b, t, a->row_rewards[row]);
        t = tail.t;
        c = tail.carry;
      }
#if RLG_VECTOR_EXT
      for (; t - b >= W; t -= W) {
        // The hardware prefetchers follow descending streams poorly: on the EPYC VM a backward copy of
        // the same five arrays ran at ~800 Mtokens/s, ~1350 with these prefetches (forward: ~1500).
        const int64_t ahead = std::max(b, t - kPrefetchTokens);
        if constexpr (HasRewards) __builtin_prefetch(p.rewards + ahead, 0);
        __builtin_prefetch(p.values + ahead, 0);
        __builtin_prefetch(p.mask + ahead, 0);
        __builtin_prefetch(p.out_adv + ahead, 1);
        __builtin_prefetch(p.out_ret + ahead, 1);
        c = block<W, HasRewards>(p, t - W, c, k);
      }
#endif
      // The row's first (length mod W) tokens (all of them without vector extensions), one at a time as
      // in the reference.
      double nv = c.next_value, last = c.adv;
      while (t > b) {
        --t;
        if (p.mask[t] == 0) {
          p.out_adv[t] = 0.0f;
          p.out_ret[t] = 0.0f;
          continue;
        }
        const double v = p.values[t];
        const double r = HasRewards ? static_cast<double>(p.rewards[t]) : 0.0;
        const double adv = (r + gamma * nv - v) + gl * last;
        p.out_adv[t] = static_cast<float>(adv);
        p.out_ret[t] = static_cast<float>(adv + v);
        last = adv;
        nv = v;
      }
    }
  }

  template <int W>
  RLG_INLINE static void run(const GaeArgs* a, int64_t rb, int64_t re) {
    if (a->rewards != nullptr) {
      rows<W, true>(a, rb, re);
    } else {
      rows<W, false>(a, rb, re);
    }
  }
};

}  // namespace gae

// ---- Token-wise kernels: plain loops that GCC vectorizes (`#pragma omp simd`) at each W ----

struct BroadcastRange {
  template <int W>
  RLG_INLINE static void run(const BroadcastRowsArgs* a, int64_t rb, int64_t re) {
    for (int64_t r = rb; r < re; ++r) {
      const float v = static_cast<float>(a->row_values[r]);
      const int64_t b = a->offsets[r], e = a->offsets[r + 1];
      float* out = a->out;
      if (a->mask == nullptr) {
        std::fill(out + b, out + e, v);
      } else {
        const uint8_t* mask = a->mask;
#pragma omp simd
        for (int64_t t = b; t < e; ++t) out[t] = mask[t] != 0 ? v : 0.0f;
      }
    }
  }
};

// Non-zero bytes, 8 per 64-bit lane: the high bit of each byte is set where the byte is non-zero (adding
// 0x7f to its low 7 bits carries into bit 7, or bit 7 was set), shifted down to 1 and summed per byte
// position; every 255 steps (before a byte could overflow) the byte sums are folded into a total. The
// auto-vectorized `c += mask[t] != 0` ran at ~5 Gtokens/s (GCC widens every byte to 64 bits).
struct CountMask {
  template <int W>
  RLG_INLINE static int64_t run(const uint8_t* mask, int64_t b, int64_t e) {
    int64_t total = 0;
    int64_t t = b;
#if RLG_VECTOR_EXT
    using Vu = typename Vec<W>::u;
    constexpr int64_t kStep = 8 * W;  // bytes per vector
    const Vu low7 = Vu{} + 0x7f7f7f7f7f7f7f7full;
    const Vu ones = Vu{} + 0x0101010101010101ull;
    while (t + kStep <= e) {
      const int64_t steps = std::min<int64_t>(255, (e - t) / kStep);
      Vu acc = {};
      for (int64_t i = 0; i < steps; ++i, t += kStep) {
        Vu w;
        __builtin_memcpy(&w, mask + t, sizeof w);
        acc += ((((w & low7) + low7) | w) >> 7) & ones;
      }
      // Sum the 8 byte counters of each lane: pairs into 16-bit fields, which the multiply adds up in its top
      // 16 bits (at most 8 * 255).
      for (int l = 0; l < W; ++l) {
        const uint64_t x = acc[l];
        const uint64_t pairs = (x & 0x00ff00ff00ff00ffull) + ((x >> 8) & 0x00ff00ff00ff00ffull);
        total += static_cast<int64_t>((pairs * 0x0001000100010001ull) >> 48);
      }
    }
#endif
    for (; t < e; ++t) total += mask[t] != 0;
    return total;
  }
};

int64_t count_mask(const uint8_t* mask, int64_t b, int64_t e) { return dispatch<CountMask>(mask, b, e); }

// Loops over [b, e) with the mask test resolved at compile time: a maybe-null mask read inside the loop
// is control flow, which keeps the loop from vectorizing. The `value` lambdas are always_inline, as
// everything in a dispatched body must be: an out-of-line copy is compiled for the baseline only.
template <bool kMasked, class Fn>
RLG_INLINE void masked_loop(const uint8_t* m, float* out, int64_t b, int64_t e, Fn&& value) {
#pragma omp simd
  for (int64_t t = b; t < e; ++t) {
    const float v = value(t);
    out[t] = (!kMasked || m[t] != 0) ? v : 0.0f;
  }
}

template <class Fn>
RLG_INLINE void maybe_masked_loop(const uint8_t* m, float* out, int64_t b, int64_t e, Fn&& value) {
  if (m == nullptr) masked_loop<false>(m, out, b, e, value);
  else masked_loop<true>(m, out, b, e, value);
}

// Float math (exp_f32, 16 lanes with AVX-512). The difference d of the two log-probs is rounded to float
// once, an error of at most half an ulp of d: no more than the float inputs' own rounding, and it matters
// only where |d| is large, where the weight is capped or tiny. Measured against the reference: within 1
// float ulp for |d| <= 5, 1e-6 relative at |d| = 20, 4e-6 at 80. (Carrying the rounding error of d as a
// second float, exact, cost a third more time in L1.)
struct ImportanceRange {
  template <int W>
  RLG_INLINE static void run(const ImportanceArgs* a, int64_t b, int64_t e) {
    const float* lo = a->logp_old;
    const float* lr = a->logp_rollout;
    // min(w, cap) rounded to float equals min(float(w), float(cap)), rounding being monotonic.
    const float cap = static_cast<float>(a->cap);
    maybe_masked_loop(a->mask, a->out, b, e, [=](int64_t t) __attribute__((always_inline)) {
      const float w = exp_f32(lo[t] - lr[t]);
      return w > cap ? cap : w;  // NaN passes, as Math.min does
    });
  }
};

// k3 = e^d - d - 1 in float without the cancellation of e^d - 1 against d for small d: with
// e^d = 2^n (1 + r + q) (exp_parts), n = 0 means d = r and k3 = q, computed directly; otherwise |d| > ln2/2,
// k3 > 0.05, and it is summed as (2^n - 1 - d) + 2^n (r + q). Within 6.6e-7 relative of the exact result
// (worst near |d| = ln2/2, where those two parts nearly cancel), ~1e-7 elsewhere; for |d| < 1e-4 more
// accurate than the reference's own double e^d - d - 1, which cancels there.
RLG_INLINE float k3_f32(float logp, float logp_ref) {
  float d = logp_ref - logp;
  d = d < -20.0f ? -20.0f : d;
  d = d > 20.0f ? 20.0f : d;
  const ExpParts e = exp_parts(d);
  const float p = pow2i(e.n);  // |n| <= 29 for |d| <= 20
  const float wide = ((p - 1.0f) - d) + p * (e.r + e.q);
  const float k = e.n == 0 ? e.q : wide;
  // The reference's lower clamp at -10 cannot bind (k3 >= 0, and both branches here are >= 0 up to
  // rounding), and one select fewer in the chain keeps GCC's code lean. NaN passes.
  return k > 10.0f ? 10.0f : k;
}

struct KlRange {
  template <int W>
  RLG_INLINE static void run(const KlArgs* a, int64_t b, int64_t e) {
    const float* lp = a->logp;
    const float* ref = a->logp_ref;
    if (a->kind == RLG_K1) {
      // The float difference is the exact difference rounded once, as the reference's double one stored.
      maybe_masked_loop(a->mask, a->out, b, e,
                        [=](int64_t t) __attribute__((always_inline)) { return lp[t] - ref[t]; });
    } else if (a->kind == RLG_K2) {
      maybe_masked_loop(a->mask, a->out, b, e, [=](int64_t t) __attribute__((always_inline)) {
        const double d = static_cast<double>(lp[t]) - static_cast<double>(ref[t]);
        return static_cast<float>(0.5 * d * d);
      });
    } else {
      maybe_masked_loop(a->mask, a->out, b, e,
                        [=](int64_t t) __attribute__((always_inline)) { return k3_f32(lp[t], ref[t]); });
    }
  }
};

// ---- Whitening statistics: count, mean and sum of squared deviations, merged pairwise ----
//
// The reference takes two passes over the batch (the mean, then the squares about it), which keeps the
// variance exact when |mean| >> std. Here rows are cut into chunks small enough for L1 (kWhitenChunk
// tokens: 16 KiB of floats and 4 KiB of mask), each chunk takes those two passes while it is in cache, and
// chunks are merged with Chan et al.'s pairwise update, exact in the same sense. So the batch is read from
// memory once for the statistics and once for the output, not three times.
constexpr int64_t kWhitenChunk = 4096;

struct Moments {
  double n = 0.0;     // mask-1 tokens
  double mean = 0.0;  // their mean (0 when n = 0)
  double m2 = 0.0;    // sum of squared deviations from the mean
};

// Chan, Golub and LeVeque's update: acc becomes the moments of both sets.
inline void merge(Moments& acc, const Moments& x) {
  if (x.n == 0.0) return;
  if (acc.n == 0.0) {
    acc = x;
    return;
  }
  const double n = acc.n + x.n;
  const double d = x.mean - acc.mean;
  acc.mean += d * (x.n / n);
  acc.m2 += x.m2 + d * d * (acc.n * x.n / n);
  acc.n = n;
}

// Two passes over [b, e) (at most kWhitenChunk tokens, so the second reads L1). Partial sums in 2 x W lanes:
// two accumulators so that consecutive adds do not wait on each other (one ran at about half the speed).
struct ChunkMoments {
  template <int W>
  RLG_INLINE static Moments run(const float* x, const uint8_t* m, int64_t b, int64_t e) {
    double s = 0.0, c = 0.0, q = 0.0;
    int64_t t = b;
#if RLG_VECTOR_EXT
    using Vd = typename Vec<W>::d;
    const Vd zero = {};
    const Vd one = zero + 1.0;
    Vd s0 = zero, s1 = zero, c0 = zero, c1 = zero;
    for (; t + 2 * W <= e; t += 2 * W) {
      const auto on0 = mask_lanes<W>(mask_bytes<W>(m + t));
      const auto on1 = mask_lanes<W>(mask_bytes<W>(m + t + W));
      s0 += on0 ? load_f32<W>(x + t) : zero;  // a select, not a multiply: NaN on a mask-0 token stays out
      s1 += on1 ? load_f32<W>(x + t + W) : zero;
      c0 += on0 ? one : zero;
      c1 += on1 ? one : zero;
    }
    s = sum<W>(s0 + s1);
    c = sum<W>(c0 + c1);
#endif
    for (int64_t u = t; u < e; ++u) {
      s += m[u] != 0 ? static_cast<double>(x[u]) : 0.0;
      c += m[u] != 0 ? 1.0 : 0.0;
    }
    if (c == 0.0) return {};
    const double mu = s / c;
    t = b;
#if RLG_VECTOR_EXT
    Vd q0 = zero, q1 = zero;
    for (; t + 2 * W <= e; t += 2 * W) {
      const Vd d0 = load_f32<W>(x + t) - mu;
      const Vd d1 = load_f32<W>(x + t + W) - mu;
      q0 += mask_lanes<W>(mask_bytes<W>(m + t)) ? d0 * d0 : zero;
      q1 += mask_lanes<W>(mask_bytes<W>(m + t + W)) ? d1 * d1 : zero;
    }
    q = sum<W>(q0 + q1);
#endif
    for (int64_t u = t; u < e; ++u) {
      const double d = static_cast<double>(x[u]) - mu;
      q += m[u] != 0 ? d * d : 0.0;
    }
    return {c, mu, q};
  }
};

struct WhitenWrite {
  template <int W>
  RLG_INLINE static void run(const float* x, const uint8_t* m, float* out, int64_t b, int64_t e, double mu,
                             double k, double back) {
#pragma omp simd
    for (int64_t t = b; t < e; ++t) {
      const double y = (static_cast<double>(x[t]) - mu) * k + back;
      out[t] = m[t] != 0 ? static_cast<float>(y) : 0.0f;
    }
  }
};

}  // namespace

int group_stats(const GroupStatsArgs& a) {
  if (a.rows < 0 || a.num_groups < 0) return RLG_BAD_ARGUMENT;
  const int64_t g = a.num_groups;
  std::vector<double> sum(g, 0.0), wsum(g, 0.0), wxsum(g, 0.0), sq(g, 0.0);
  std::vector<int64_t> count(g, 0);
  for (int64_t r = 0; r < a.rows; ++r) {
    const int32_t id = a.group_ids[r];
    if (id == -1) continue;
    if (id < -1 || id >= g) return RLG_BAD_INDEX;
    const double x = a.values[r];
    const double w = a.weights == nullptr ? 1.0 : a.weights[r];
    sum[id] += x;
    wsum[id] += w;
    wxsum[id] += w * x;
    ++count[id];
  }
  for (int64_t i = 0; i < g; ++i) a.out_mean[i] = count[i] > 0 ? sum[i] / static_cast<double>(count[i]) : 0.0;
  for (int64_t r = 0; r < a.rows; ++r) {
    const int32_t id = a.group_ids[r];
    if (id < 0) continue;
    const double d = a.values[r] - a.out_mean[id];
    sq[id] += d * d;
  }
  for (int64_t i = 0; i < g; ++i) {
    a.out_count[i] = static_cast<int32_t>(count[i]);
    a.out_std[i] = count[i] > 1 ? std::sqrt(sq[i] / static_cast<double>(count[i] - 1)) : 0.0;
    if (a.weights == nullptr) {
      a.out_weighted_mean[i] = a.out_mean[i];
    } else {
      a.out_weighted_mean[i] = wsum[i] != 0.0 ? wxsum[i] / wsum[i] : 0.0;
    }
  }
  return RLG_OK;
}

int broadcast_rows(const BroadcastRowsArgs& a, Exec e) {
  if (int s = check_offsets(a.offsets, a.rows, a.tokens)) return s;
  if (e.device == 1) {
    const CudaApi* api = cuda_or_null();
    if (api == nullptr) return RLG_CUDA_UNAVAILABLE;
    return api->broadcast_rows(a.offsets, a.rows, a.row_values, a.mask, a.out, a.tokens);
  }
  parallel_rows(a.offsets, a.rows, threads_for(e, a.tokens),
                [&](int, int64_t rb, int64_t re) { dispatch<BroadcastRange>(&a, rb, re); });
  return RLG_OK;
}

int gather_tokens(const GatherTokensArgs& a, Exec e) {
  if (a.tokens < 0 || a.num_values < 0) return RLG_BAD_ARGUMENT;
  if (e.device == 1) {
    const CudaApi* api = cuda_or_null();
    if (api == nullptr) return RLG_CUDA_UNAVAILABLE;
    return api->gather_tokens(a.values, a.num_values, a.index, a.mask, a.out, a.tokens);
  }
  std::atomic<bool> bad{false};
  const int64_t nv = a.num_values;
  parallel_ranges(a.tokens, threads_for(e, a.tokens), [&](int, int64_t b, int64_t end) {
    bool local_bad = false;
    for (int64_t t = b; t < end; ++t) {
      const int32_t i = a.index[t];
      local_bad |= i < -1 || i >= nv;
      const bool on = (a.mask == nullptr || a.mask[t] != 0) && i >= 0 && i < nv;
      a.out[t] = on ? static_cast<float>(a.values[i]) : 0.0f;
    }
    if (local_bad) bad.store(true, std::memory_order_relaxed);
  });
  return bad.load() ? RLG_BAD_INDEX : RLG_OK;
}

int row_counts(const RowCountsArgs& a, Exec e) {
  if (int s = check_offsets(a.offsets, a.rows, a.tokens)) return s;
  if (e.device == 1) {
    const CudaApi* api = cuda_or_null();
    if (api == nullptr) return RLG_CUDA_UNAVAILABLE;
    return api->row_counts(a.offsets, a.rows, a.mask, a.tokens, a.out);
  }
  parallel_rows(a.offsets, a.rows, threads_for(e, a.tokens), [&](int, int64_t rb, int64_t re) {
    for (int64_t r = rb; r < re; ++r) a.out[r] = static_cast<int32_t>(count_mask(a.mask, a.offsets[r], a.offsets[r + 1]));
  });
  return RLG_OK;
}

int masked_gae(const GaeArgs& a, Exec e) {
  if (int s = check_offsets(a.offsets, a.rows, a.tokens)) return s;
  if (!std::isfinite(a.gamma) || !std::isfinite(a.lambda)) return RLG_BAD_ARGUMENT;
  if (e.device == 1) {
    const CudaApi* api = cuda_or_null();
    if (api == nullptr) return RLG_CUDA_UNAVAILABLE;
    return api->masked_gae(a.offsets, a.rows, a.rewards, a.row_rewards, a.values, a.mask, a.tokens, a.gamma, a.lambda,
                           a.out_advantages, a.out_returns);
  }
  parallel_rows(a.offsets, a.rows, threads_for(e, a.tokens),
                [&](int, int64_t rb, int64_t re) { dispatch<gae::Rows>(&a, rb, re); });
  return RLG_OK;
}

int masked_whiten(const WhitenArgs& a, Exec e) {
  if (int s = check_offsets(a.offsets, a.rows, a.tokens)) return s;
  if (!(a.eps >= 0.0)) return RLG_BAD_ARGUMENT;
  const int64_t nseg = a.row_segment == nullptr ? 1 : a.num_segments;
  if (nseg < 0) return RLG_BAD_ARGUMENT;
  if (a.row_segment != nullptr) {
    for (int64_t r = 0; r < a.rows; ++r) {
      if (a.row_segment[r] < -1 || a.row_segment[r] >= nseg) return RLG_BAD_INDEX;
    }
  }
  if (e.device == 1) {
    const CudaApi* api = cuda_or_null();
    if (api == nullptr) return RLG_CUDA_UNAVAILABLE;
    return api->masked_whiten(a.offsets, a.rows, a.x, a.mask, a.tokens, a.row_segment, nseg, a.shift_mean ? 1 : 0,
                              a.unbiased ? 1 : 0, a.eps, a.out);
  }
  auto seg_of = [&](int64_t r) -> int64_t { return a.row_segment == nullptr ? 0 : a.row_segment[r]; };
  const int threads = threads_for(e, a.tokens);

  // Pass 1: moments per segment, one partial per worker (merged in worker order below).
  std::vector<Moments> part(static_cast<size_t>(threads) * nseg);
  parallel_rows(a.offsets, a.rows, threads, [&](int w, int64_t rb, int64_t re) {
    for (int64_t r = rb; r < re; ++r) {
      const int64_t g = seg_of(r);
      if (g < 0) continue;
      for (int64_t b = a.offsets[r]; b < a.offsets[r + 1]; b += kWhitenChunk) {
        const int64_t e = std::min<int64_t>(b + kWhitenChunk, a.offsets[r + 1]);
        merge(part[w * nseg + g], dispatch<ChunkMoments>(a.x, a.mask, b, e));
      }
    }
  });
  std::vector<double> mean(nseg, 0.0), inv(nseg, 0.0);
  for (int64_t g = 0; g < nseg; ++g) {
    Moments m;
    for (int w = 0; w < threads; ++w) merge(m, part[w * nseg + g]);
    const double n = m.n;
    const double denom = a.unbiased ? n - 1.0 : n;
    const double var = n > 1.0 || (!a.unbiased && n > 0.0) ? m.m2 / denom : 0.0;
    mean[g] = m.mean;
    inv[g] = 1.0 / std::sqrt(var + a.eps);
  }

  // Pass 2: write.
  parallel_rows(a.offsets, a.rows, threads, [&](int, int64_t rb, int64_t re) {
    for (int64_t r = rb; r < re; ++r) {
      const int64_t g = seg_of(r);
      const int64_t b = a.offsets[r], end = a.offsets[r + 1];
      if (g < 0) {
        std::fill(a.out + b, a.out + end, 0.0f);
        continue;
      }
      dispatch<WhitenWrite>(a.x, a.mask, a.out, b, end, mean[g], inv[g], a.shift_mean ? 0.0 : mean[g]);
    }
  });
  return RLG_OK;
}

int tree_node_values(const TreeValuesArgs& a) {
  if (a.nodes < 0 || a.leaves < 0) return RLG_BAD_ARGUMENT;
  for (int64_t i = 0; i < a.nodes; ++i) {
    if (a.parent[i] < -1 || a.parent[i] >= i) return RLG_BAD_TREE;
  }
  std::vector<double> sum(a.nodes, 0.0);
  std::vector<int64_t> count(a.nodes, 0);
  for (int64_t k = 0; k < a.leaves; ++k) {
    const int32_t n = a.leaf_node[k];
    if (n == -1) continue;
    if (n < -1 || n >= a.nodes) return RLG_BAD_INDEX;
    sum[n] += a.leaf_reward[k];
    ++count[n];
  }
  // Children come after their parent, so one backward sweep accumulates every subtree.
  for (int64_t i = a.nodes - 1; i >= 0; --i) {
    const int32_t p = a.parent[i];
    if (p >= 0) {
      sum[p] += sum[i];
      count[p] += count[i];
    }
  }
  for (int64_t i = 0; i < a.nodes; ++i) {
    a.out_leaf_count[i] = static_cast<int32_t>(count[i]);
    a.out_value[i] = count[i] > 0 ? sum[i] / static_cast<double>(count[i]) : 0.0;
  }
  return RLG_OK;
}

int importance_weights(const ImportanceArgs& a, Exec e) {
  if (a.tokens < 0 || std::isnan(a.cap) || a.cap <= 0.0) return RLG_BAD_ARGUMENT;
  if (e.device == 1) {
    const CudaApi* api = cuda_or_null();
    if (api == nullptr) return RLG_CUDA_UNAVAILABLE;
    return api->importance_weights(a.logp_old, a.logp_rollout, a.mask, a.tokens, a.cap, a.out);
  }
  parallel_ranges(a.tokens, threads_for(e, a.tokens),
                  [&](int, int64_t b, int64_t end) { dispatch<ImportanceRange>(&a, b, end); });
  return RLG_OK;
}

int kl_divergence(const KlArgs& a, Exec e) {
  if (a.tokens < 0) return RLG_BAD_ARGUMENT;
  if (a.kind != RLG_K1 && a.kind != RLG_K2 && a.kind != RLG_K3) return RLG_BAD_MODE;
  if (e.device == 1) {
    const CudaApi* api = cuda_or_null();
    if (api == nullptr) return RLG_CUDA_UNAVAILABLE;
    return api->kl(a.logp, a.logp_ref, a.mask, a.tokens, a.kind, a.out);
  }
  parallel_ranges(a.tokens, threads_for(e, a.tokens),
                  [&](int, int64_t b, int64_t end) { dispatch<KlRange>(&a, b, end); });
  return RLG_OK;
}

int loss_weights(const LossWeightsArgs& a, Exec e) {
  if (int s = check_offsets(a.offsets, a.rows, a.tokens)) return s;
  if (a.mode < RLG_TOKEN_MEAN || a.mode > RLG_SEQ_MEAN_TOKEN_SUM_NORM) return RLG_BAD_MODE;
  if (!(a.max_len >= 0.0) || !(a.total_tokens >= 0.0) || !(a.total_seqs >= 0.0)) return RLG_BAD_ARGUMENT;
  std::vector<int32_t> counts(a.rows);
  if (int s = row_counts(RowCountsArgs{a.offsets, a.rows, a.mask, a.tokens, counts.data()}, e)) return s;
  double tokens = 0.0, seqs = 0.0, longest = 0.0;
  for (int64_t r = 0; r < a.rows; ++r) {
    tokens += counts[r];
    seqs += counts[r] > 0 ? 1.0 : 0.0;
    longest = std::max(longest, static_cast<double>(counts[r]));
  }
  if (a.total_tokens > 0.0) tokens = a.total_tokens;
  if (a.total_seqs > 0.0) seqs = a.total_seqs;
  if (a.max_len > 0.0) longest = a.max_len;
  std::vector<double> scale(a.rows, 0.0);
  for (int64_t r = 0; r < a.rows; ++r) {
    if (counts[r] == 0) continue;
    switch (a.mode) {
      case RLG_TOKEN_MEAN: scale[r] = 1.0 / tokens; break;
      case RLG_SEQ_MEAN_TOKEN_MEAN: scale[r] = 1.0 / (static_cast<double>(counts[r]) * seqs); break;
      case RLG_SEQ_MEAN_TOKEN_SUM: scale[r] = 1.0 / seqs; break;
      default: scale[r] = 1.0 / longest; break;
    }
  }
  return broadcast_rows(BroadcastRowsArgs{a.offsets, a.rows, scale.data(), a.mask, a.out, a.tokens}, e);
}

}  // namespace rlgate
