// CPU implementations of the kernels declared in kernels.h, and the CPU/CUDA dispatch.
// Arithmetic is kept in the same order as rl-core/kernels/reference.ts (double accumulators, float stores,
// no FMA contraction: -ffp-contract=off) so native and reference agree to rounding.
#include "kernels.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <thread>
#include <vector>

#include "cuda_loader.h"
#include "parallel.h"
#include "vec_math.h"

namespace rlgate {

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

// ---- GAE: rows scanned in lockstep, so their independent recurrences overlap in the CPU ----

// Two lanes: two independent chains overlap the add/multiply latency, while the backward memory streams
// (five arrays per lane) stay few enough for the hardware prefetchers; on this project's EPYC VM, 2 lanes
// took ~0.9 ns/token, 4 lanes ~1.3 and 1 lane ~2 on 20k-token rows.
constexpr int kLanes = 2;

struct GaeLanes {
  int64_t cur[kLanes];   // one past the next token to visit (scanning backwards)
  int64_t stop[kLanes];  // the row's first token
  double next_value[kLanes];
  double last_adv[kLanes];
};

template <int N>
void gae_advance(const GaeArgs& a, GaeLanes& s, int64_t steps) {
  const double gamma = a.gamma;
  const double gl = a.gamma * a.lambda;
  int64_t cur[N];
  double nv[N], last[N];
  for (int l = 0; l < N; ++l) {
    cur[l] = s.cur[l];
    nv[l] = s.next_value[l];
    last[l] = s.last_adv[l];
  }
  for (int64_t k = 0; k < steps; ++k) {
#pragma GCC unroll 2
    for (int l = 0; l < N; ++l) {
      const int64_t t = --cur[l];
      const double v = a.values[t];
      const double delta = static_cast<double>(a.rewards[t]) + gamma * nv[l] - v;
      const double adv = delta + gl * last[l];
      const bool m = a.mask[t] != 0;
      a.out_advantages[t] = m ? static_cast<float>(adv) : 0.0f;
      a.out_returns[t] = m ? static_cast<float>(adv + v) : 0.0f;
      last[l] = m ? adv : last[l];
      nv[l] = m ? v : nv[l];
    }
  }
  for (int l = 0; l < N; ++l) {
    s.cur[l] = cur[l];
    s.next_value[l] = nv[l];
    s.last_adv[l] = last[l];
  }
}

void gae_rows(const GaeArgs& a, int64_t rb, int64_t re) {
  GaeLanes s;
  int n = 0;
  int64_t next_row = rb;
  auto refill = [&](int l) {
    while (next_row < re) {
      const int64_t r = next_row++;
      if (a.offsets[r + 1] > a.offsets[r]) {
        s.cur[l] = a.offsets[r + 1];
        s.stop[l] = a.offsets[r];
        s.next_value[l] = 0.0;
        s.last_adv[l] = 0.0;
        return true;
      }
    }
    return false;
  };
  while (n < kLanes && refill(n)) ++n;
  while (n > 0) {
    int64_t steps = std::numeric_limits<int64_t>::max();
    for (int l = 0; l < n; ++l) steps = std::min(steps, s.cur[l] - s.stop[l]);
    static_assert(kLanes == 2, "one call per lane count");
    if (n == 2) gae_advance<2>(a, s, steps);
    else gae_advance<1>(a, s, steps);
    for (int l = 0; l < n;) {
      if (s.cur[l] == s.stop[l] && !refill(l)) {
        --n;  // retire the lane: move the last one into its place
        s.cur[l] = s.cur[n];
        s.stop[l] = s.stop[n];
        s.next_value[l] = s.next_value[n];
        s.last_adv[l] = s.last_adv[n];
        continue;
      }
      ++l;
    }
  }
}

void broadcast_range(const BroadcastRowsArgs& a, int64_t rb, int64_t re) {
  for (int64_t r = rb; r < re; ++r) {
    const float v = static_cast<float>(a.row_values[r]);
    const int64_t b = a.offsets[r], e = a.offsets[r + 1];
    float* out = a.out;
    if (a.mask == nullptr) {
      std::fill(out + b, out + e, v);
    } else {
      const uint8_t* mask = a.mask;
#pragma omp simd
      for (int64_t t = b; t < e; ++t) out[t] = mask[t] != 0 ? v : 0.0f;
    }
  }
}

// Clamp that lets NaN through, as Math.min/Math.max do in the reference.
inline double clamp_nan(double x, double lo, double hi) {
  double y = x < lo ? lo : x;
  return y > hi ? hi : y;
}

int64_t count_mask(const uint8_t* mask, int64_t b, int64_t e) {
  int64_t c = 0;
#pragma omp simd reduction(+ : c)
  for (int64_t t = b; t < e; ++t) c += mask[t] != 0;
  return c;
}


// Loops over [b, e) with the mask test resolved at compile time: a maybe-null mask read inside the loop
// is control flow, which keeps the loop from vectorizing.
template <bool kMasked, class Fn>
inline void masked_loop(const uint8_t* m, float* out, int64_t b, int64_t e, Fn&& value) {
#pragma omp simd
  for (int64_t t = b; t < e; ++t) {
    const float v = value(t);
    out[t] = (!kMasked || m[t] != 0) ? v : 0.0f;
  }
}

template <class Fn>
inline void maybe_masked_loop(const uint8_t* m, float* out, int64_t b, int64_t e, Fn&& value) {
  if (m == nullptr) masked_loop<false>(m, out, b, e, value);
  else masked_loop<true>(m, out, b, e, value);
}

RLG_SIMD_CLONES
void importance_range(const ImportanceArgs& a, int64_t b, int64_t e) {
  const float* lo = a.logp_old;
  const float* lr = a.logp_rollout;
  const double cap = a.cap;
  maybe_masked_loop(a.mask, a.out, b, e, [=](int64_t t) {
    const double w = exp_vec(static_cast<double>(lo[t]) - static_cast<double>(lr[t]));
    double c = w < cap ? w : cap;
    c = w != w ? w : c;  // NaN passes, as Math.min does
    return static_cast<float>(c);
  });
}

RLG_SIMD_CLONES
void kl_range(const KlArgs& a, int64_t b, int64_t e) {
  const float* lp = a.logp;
  const float* ref = a.logp_ref;
  if (a.kind == RLG_K1) {
    maybe_masked_loop(a.mask, a.out, b, e, [=](int64_t t) {
      return static_cast<float>(static_cast<double>(lp[t]) - static_cast<double>(ref[t]));
    });
  } else if (a.kind == RLG_K2) {
    maybe_masked_loop(a.mask, a.out, b, e, [=](int64_t t) {
      const double d = static_cast<double>(lp[t]) - static_cast<double>(ref[t]);
      return static_cast<float>(0.5 * d * d);
    });
  } else {
    maybe_masked_loop(a.mask, a.out, b, e, [=](int64_t t) {
      const double d = clamp_nan(static_cast<double>(ref[t]) - static_cast<double>(lp[t]), -20.0, 20.0);
      return static_cast<float>(clamp_nan(exp_vec(d) - d - 1.0, -10.0, 10.0));
    });
  }
}

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
                [&](int, int64_t rb, int64_t re) { broadcast_range(a, rb, re); });
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
    return api->masked_gae(a.offsets, a.rows, a.rewards, a.values, a.mask, a.tokens, a.gamma, a.lambda,
                           a.out_advantages, a.out_returns);
  }
  parallel_rows(a.offsets, a.rows, threads_for(e, a.tokens),
                [&](int, int64_t rb, int64_t re) { gae_rows(a, rb, re); });
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
  std::vector<double> part(static_cast<size_t>(threads) * nseg, 0.0);
  std::vector<int64_t> part_count(static_cast<size_t>(threads) * nseg, 0);

  // Pass 1: sums and counts per segment (one partial per worker, reduced below).
  parallel_rows(a.offsets, a.rows, threads, [&](int w, int64_t rb, int64_t re) {
    for (int64_t r = rb; r < re; ++r) {
      const int64_t g = seg_of(r);
      if (g < 0) continue;
      const float* x = a.x;
      const uint8_t* m = a.mask;
      double s = 0.0;
#pragma omp simd reduction(+ : s)
      for (int64_t t = a.offsets[r]; t < a.offsets[r + 1]; ++t) s += m[t] != 0 ? static_cast<double>(x[t]) : 0.0;
      part[w * nseg + g] += s;
      part_count[w * nseg + g] += count_mask(m, a.offsets[r], a.offsets[r + 1]);
    }
  });
  std::vector<double> mean(nseg, 0.0), inv(nseg, 0.0);
  std::vector<int64_t> count(nseg, 0);
  for (int64_t g = 0; g < nseg; ++g) {
    double s = 0.0;
    for (int w = 0; w < threads; ++w) {
      s += part[w * nseg + g];
      count[g] += part_count[w * nseg + g];
    }
    mean[g] = count[g] > 0 ? s / static_cast<double>(count[g]) : 0.0;
  }

  // Pass 2: centered sum of squares (two passes keep the variance exact when |mean| >> std).
  std::fill(part.begin(), part.end(), 0.0);
  parallel_rows(a.offsets, a.rows, threads, [&](int w, int64_t rb, int64_t re) {
    for (int64_t r = rb; r < re; ++r) {
      const int64_t g = seg_of(r);
      if (g < 0) continue;
      const double mu = mean[g];
      const float* x = a.x;
      const uint8_t* m = a.mask;
      double s = 0.0;
#pragma omp simd reduction(+ : s)
      for (int64_t t = a.offsets[r]; t < a.offsets[r + 1]; ++t) {
        const double d = static_cast<double>(x[t]) - mu;
        s += m[t] != 0 ? d * d : 0.0;
      }
      part[w * nseg + g] += s;
    }
  });
  for (int64_t g = 0; g < nseg; ++g) {
    double s = 0.0;
    for (int w = 0; w < threads; ++w) s += part[w * nseg + g];
    const int64_t n = count[g];
    const double denom = a.unbiased ? static_cast<double>(n - 1) : static_cast<double>(n);
    const double var = n > 1 || (!a.unbiased && n > 0) ? s / denom : 0.0;
    inv[g] = 1.0 / std::sqrt(var + a.eps);
  }

  // Pass 3: write.
  parallel_rows(a.offsets, a.rows, threads, [&](int, int64_t rb, int64_t re) {
    for (int64_t r = rb; r < re; ++r) {
      const int64_t g = seg_of(r);
      float* out = a.out;
      const int64_t b = a.offsets[r], end = a.offsets[r + 1];
      if (g < 0) {
        std::fill(out + b, out + end, 0.0f);
        continue;
      }
      const double mu = mean[g], k = inv[g], back = a.shift_mean ? 0.0 : mu;
      const float* x = a.x;
      const uint8_t* m = a.mask;
#pragma omp simd
      for (int64_t t = b; t < end; ++t) {
        const double y = (static_cast<double>(x[t]) - mu) * k + back;
        out[t] = m[t] != 0 ? static_cast<float>(y) : 0.0f;
      }
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
  parallel_ranges(a.tokens, threads_for(e, a.tokens), [&](int, int64_t b, int64_t end) { importance_range(a, b, end); });
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
  parallel_ranges(a.tokens, threads_for(e, a.tokens), [&](int, int64_t b, int64_t end) { kl_range(a, b, end); });
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
