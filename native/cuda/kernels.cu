// CUDA versions of the token-level kernels, behind the extern "C" API of src/cuda_api.h.
// Built by native/cuda/build.sh into build/Release/rlgate_cuda.so with the CUDA runtime linked statically;
// the addon dlopens it, so neither needs a GPU or a CUDA install to load. No napi.h here.
// Every call takes host pointers: it copies inputs to the device on the calling thread's per-thread stream,
// runs, copies results back and synchronizes. Arithmetic follows rl-core/kernels/reference.ts (doubles,
// float stores); reductions use atomics, so sums may differ from the CPU in the last bits of a double.
#ifdef RLG_CUDA_EMULATION
#include "emulation.h"  // the CPU emulation the tests build where there is no GPU (see emulation.h)
#else
#include <cuda_runtime.h>
#define RLG_LAUNCH(kernel, grid, block, ...) kernel<<<grid, block, 0, cudaStreamPerThread>>>(__VA_ARGS__)
#endif
#include <stdint.h>
#include <stdlib.h>

#include <atomic>
#include <vector>

#include "../src/cuda_api.h"
#include "../src/status.h"

namespace {

constexpr int kThreads = 256;
constexpr int64_t kTile = kThreads * 16;  // tokens per block in row-tiled kernels

int status_of(cudaError_t err) {
  if (err == cudaSuccess) return RLG_OK;
  cudaGetLastError();  // clear sticky-free errors so the next call starts clean
  return err == cudaErrorMemoryAllocation ? RLG_OUT_OF_MEMORY : RLG_CUDA_ERROR;
}

#define RLG_CHECK(call)                          \
  do {                                           \
    int rlg_s_ = status_of(call);                \
    if (rlg_s_ != RLG_OK) return rlg_s_;         \
  } while (0)

// The device is chosen per call (the runtime's current device is per host thread, and async kernels run
// on pool threads): RLGATE_CUDA_DEVICE, default 0.
cudaError_t select_device() {
  const char* env = getenv("RLGATE_CUDA_DEVICE");
  return cudaSetDevice(env != nullptr ? atoi(env) : 0);
}

// Stream-ordered allocation (a pool, cheap per call) where the driver supports it, plain cudaMalloc where
// it does not (some virtualized or MIG setups).
std::atomic<bool> g_pool_unsupported{false};

// A device buffer on the per-thread stream, freed on scope exit.
template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (ptr_ == nullptr) return;
    if (pooled_) cudaFreeAsync(ptr_, cudaStreamPerThread);
    else cudaFree(ptr_);
  }
  cudaError_t alloc(int64_t count) {
    if (count <= 0) return cudaSuccess;
    const size_t bytes = static_cast<size_t>(count) * sizeof(T);
    if (!g_pool_unsupported) {
      cudaError_t err = cudaMallocAsync(reinterpret_cast<void**>(&ptr_), bytes, cudaStreamPerThread);
      if (err != cudaErrorNotSupported) {
        pooled_ = err == cudaSuccess;
        return err;
      }
      cudaGetLastError();
      g_pool_unsupported = true;
    }
    return cudaMalloc(reinterpret_cast<void**>(&ptr_), bytes);
  }
  // Allocates and copies `count` elements from the host; a null host pointer leaves the buffer null.
  cudaError_t upload(const T* host, int64_t count) {
    if (host == nullptr || count <= 0) return cudaSuccess;
    cudaError_t err = alloc(count);
    if (err != cudaSuccess) return err;
    return cudaMemcpyAsync(ptr_, host, static_cast<size_t>(count) * sizeof(T), cudaMemcpyHostToDevice,
                           cudaStreamPerThread);
  }
  cudaError_t download(T* host, int64_t count) const {
    if (count <= 0) return cudaSuccess;
    return cudaMemcpyAsync(host, ptr_, static_cast<size_t>(count) * sizeof(T), cudaMemcpyDeviceToHost,
                           cudaStreamPerThread);
  }
  T* get() const { return ptr_; }

 private:
  T* ptr_ = nullptr;
  bool pooled_ = false;
};

cudaError_t sync() { return cudaStreamSynchronize(cudaStreamPerThread); }

unsigned grid_for(int64_t n) {
  int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65536 * 8 ? blocks : 65536 * 8);
}

int64_t longest_row(const int32_t* offsets, int64_t rows) {
  int64_t m = 0;
  for (int64_t r = 0; r < rows; ++r) m = offsets[r + 1] - offsets[r] > m ? offsets[r + 1] - offsets[r] : m;
  return m;
}

// Grid of (rows, tile slots) for the row-tiled kernels: block (r, y) takes tiles y, y + gridDim.y, ... of row
// r. gridDim.y covers the longest row's tiles, but at most 65535 (CUDA's limit: rows of 268M tokens and more)
// and no more than keeps rows x gridDim.y near 2^24 blocks (one long row among millions of short ones would
// otherwise launch mostly empty blocks).
// RLGATE_CUDA_MAX_TILE_SLOTS lowers the 65535, so that tests take the loop on small batches.
dim3 row_tile_grid(const int32_t* offsets, int64_t rows) {
  static const int64_t max_slots = [] {
    const char* env = getenv("RLGATE_CUDA_MAX_TILE_SLOTS");
    const int64_t v = env != nullptr ? atoll(env) : 65535;
    return v >= 1 && v <= 65535 ? v : 65535;
  }();
  const int64_t tiles = (longest_row(offsets, rows) + kTile - 1) / kTile;
  const int64_t spread = (int64_t(1) << 24) / (rows > 0 ? rows : 1);
  int64_t y = tiles < max_slots ? tiles : max_slots;
  y = y < spread ? y : spread;
  return dim3(static_cast<unsigned>(rows), static_cast<unsigned>(y < 1 ? 1 : y));
}

// The first token of the first tile slot of this block's row, and the stride between its tiles.
__device__ int64_t first_tile(const int32_t* offsets, int64_t r) { return offsets[r] + int64_t(blockIdx.y) * kTile; }
__device__ int64_t tile_stride() { return int64_t(gridDim.y) * kTile; }

template <class T>
__device__ T block_sum(T v) {
  __shared__ T partial[kThreads / 32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  T total = 0;
  if (threadIdx.x == 0) {
    for (int w = 0; w < kThreads / 32; ++w) total += partial[w];
  }
  __syncthreads();
  return total;  // meaningful in thread 0 only
}

__device__ int64_t row_of(const int32_t* offsets, int64_t rows, int64_t t) {
  int64_t lo = 0, hi = rows - 1;  // last row r with offsets[r] <= t (skips empty rows)
  while (lo < hi) {
    int64_t mid = (lo + hi + 1) >> 1;
    if (offsets[mid] <= t) lo = mid; else hi = mid - 1;
  }
  return lo;
}

__global__ void k_broadcast(const int32_t* offsets, int64_t rows, const double* row_values, const uint8_t* mask,
                            float* out, int64_t tokens) {
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < tokens; t += int64_t(gridDim.x) * blockDim.x) {
    const float v = static_cast<float>(row_values[row_of(offsets, rows, t)]);
    out[t] = (mask == nullptr || mask[t] != 0) ? v : 0.0f;
  }
}

__global__ void k_gather(const double* values, int64_t num_values, const int32_t* index, const uint8_t* mask,
                         float* out, int64_t tokens, int* bad) {
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < tokens; t += int64_t(gridDim.x) * blockDim.x) {
    const int32_t i = index[t];
    if (i < -1 || i >= num_values) atomicOr(bad, 1);
    const bool on = (mask == nullptr || mask[t] != 0) && i >= 0 && i < num_values;
    out[t] = on ? static_cast<float>(values[i]) : 0.0f;
  }
}

__global__ void k_row_counts(const int32_t* offsets, const uint8_t* mask, unsigned long long* counts) {
  const int64_t r = blockIdx.x;
  const int64_t end = offsets[r + 1];
  unsigned long long c = 0;
  for (int64_t b = first_tile(offsets, r); b < end; b += tile_stride()) {
    const int64_t e = min(end, b + kTile);
    for (int64_t t = b + threadIdx.x; t < e; t += blockDim.x) c += mask[t] != 0;
  }
  c = block_sum(c);  // every thread of the block gets here (the loops above are uniform per block)
  if (threadIdx.x == 0 && c != 0) atomicAdd(&counts[r], c);
}

// GAE, one block per row. The row is cut into one chunk per thread. Within a chunk with incoming state
// (V', A') from the right, every advantage is the zero-state one plus (gamma*lambda)^k * K with
// K = gamma*V' + gamma*lambda*A', so each chunk is summarized by (has mask tokens, V and zero-state A of
// its leftmost mask token, (gamma*lambda)^(m-1)); thread 0 chains the summaries right to left, and every
// thread then rescans its chunk from its exact incoming state.
// r_t = rewards[t] (nullable: 0), plus row_rewards[row] (nullable) at the row's last mask-1 token L, summed in
// double as on the CPU. L is the last mask-1 token of the rightmost chunk that has one.
__global__ void k_gae(const int32_t* offsets, const float* rewards, const double* row_rewards, const float* values,
                      const uint8_t* mask, double gamma, double lambda, float* out_adv, float* out_ret) {
  __shared__ double s_first_v[kThreads], s_first_a[kThreads], s_pow[kThreads], s_in_v[kThreads], s_in_a[kThreads];
  __shared__ int s_has[kThreads];
  __shared__ int64_t s_last_on[kThreads];
  __shared__ int64_t s_row_last;
  const int64_t r = blockIdx.x;
  const int64_t b = offsets[r], n = offsets[r + 1] - b;
  if (n == 0) return;
  const double gl = gamma * lambda;
  const int64_t chunk = (n + kThreads - 1) / kThreads;
  const int64_t cb = b + min(n, chunk * threadIdx.x), ce = b + min(n, chunk * (threadIdx.x + 1));

  int64_t row_last = -1;
  if (row_rewards != nullptr) {
    int64_t mine = -1;
    for (int64_t t = ce - 1; t >= cb; --t) {
      if (mask[t] != 0) {
        mine = t;
        break;
      }
    }
    s_last_on[threadIdx.x] = mine;
    __syncthreads();
    if (threadIdx.x == 0) {
      int64_t found = -1;
      for (int k = kThreads - 1; k >= 0 && found < 0; --k) found = s_last_on[k];
      s_row_last = found;
    }
    __syncthreads();
    row_last = s_row_last;
  }
  const double row_reward = row_rewards != nullptr ? row_rewards[r] : 0.0;
  auto reward = [&](int64_t t) {
    const double x = rewards != nullptr ? static_cast<double>(rewards[t]) : 0.0;
    return t == row_last ? x + row_reward : x;
  };

  double nv = 0.0, last = 0.0, pw = 1.0;
  int has = 0;
  for (int64_t t = ce - 1; t >= cb; --t) {
    if (mask[t] == 0) continue;
    const double v = values[t];
    const double delta = reward(t) + gamma * nv - v;
    last = delta + gl * last;
    nv = v;
    pw = has ? pw * gl : 1.0;
    has = 1;
  }
  s_has[threadIdx.x] = has;
  s_first_v[threadIdx.x] = nv;
  s_first_a[threadIdx.x] = last;
  s_pow[threadIdx.x] = pw;
  __syncthreads();
  if (threadIdx.x == 0) {
    double in_v = 0.0, in_a = 0.0;
    for (int k = kThreads - 1; k >= 0; --k) {
      s_in_v[k] = in_v;
      s_in_a[k] = in_a;
      if (s_has[k]) {
        const double kk = gamma * in_v + gl * in_a;
        // kk == 0 (nothing to the right): no term, also when gl^(m-1) overflowed (gamma * lambda > 1).
        in_a = s_first_a[k] + (kk == 0.0 ? 0.0 : s_pow[k] * kk);
        in_v = s_first_v[k];
      }
    }
  }
  __syncthreads();
  nv = s_in_v[threadIdx.x];
  last = s_in_a[threadIdx.x];
  for (int64_t t = ce - 1; t >= cb; --t) {
    const double v = values[t];
    const bool m = mask[t] != 0;
    const double delta = (m ? reward(t) : 0.0) + gamma * nv - v;
    const double adv = delta + gl * last;
    out_adv[t] = m ? static_cast<float>(adv) : 0.0f;
    out_ret[t] = m ? static_cast<float>(adv + v) : 0.0f;
    if (m) {
      last = adv;
      nv = v;
    }
  }
}


// Whitening pass 1 (center == nullptr: sums) or pass 2 (centered squares), per segment, row-tiled.
__global__ void k_segment_sums(const int32_t* offsets, const float* x, const uint8_t* mask, const int32_t* row_segment,
                               const double* center, double* seg_sum, unsigned long long* seg_count) {
  const int64_t r = blockIdx.x;
  const int seg = row_segment == nullptr ? 0 : row_segment[r];
  if (seg < 0) return;
  const int64_t end = offsets[r + 1];
  const double mu = center == nullptr ? 0.0 : center[seg];
  double s = 0.0;
  unsigned long long c = 0;
  for (int64_t b = first_tile(offsets, r); b < end; b += tile_stride()) {
    const int64_t e = min(end, b + kTile);
    for (int64_t t = b + threadIdx.x; t < e; t += blockDim.x) {
      if (mask[t] == 0) continue;
      const double d = static_cast<double>(x[t]) - mu;
      s += center == nullptr ? d : d * d;
      ++c;
    }
  }
  s = block_sum(s);
  c = block_sum(c);
  if (threadIdx.x == 0 && c != 0) {
    atomicAdd(&seg_sum[seg], s);
    if (seg_count != nullptr) atomicAdd(&seg_count[seg], c);
  }
}

__global__ void k_whiten_write(const int32_t* offsets, const float* x, const uint8_t* mask, const int32_t* row_segment,
                               const double* mean, const double* inv, int shift_mean, float* out) {
  const int64_t r = blockIdx.x;
  const int seg = row_segment == nullptr ? 0 : row_segment[r];
  const int64_t end = offsets[r + 1];
  for (int64_t b = first_tile(offsets, r); b < end; b += tile_stride()) {
    const int64_t e = min(end, b + kTile);
    for (int64_t t = b + threadIdx.x; t < e; t += blockDim.x) {
      if (seg < 0 || mask[t] == 0) {
        out[t] = 0.0f;
        continue;
      }
      const double mu = mean[seg];
      const double y = (static_cast<double>(x[t]) - mu) * inv[seg] + (shift_mean ? 0.0 : mu);
      out[t] = static_cast<float>(y);
    }
  }
}

__global__ void k_importance(const float* logp_old, const float* logp_rollout, const uint8_t* mask, int64_t tokens,
                             double cap, float* out) {
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < tokens; t += int64_t(gridDim.x) * blockDim.x) {
    if (mask != nullptr && mask[t] == 0) {
      out[t] = 0.0f;
      continue;
    }
    const double w = exp(static_cast<double>(logp_old[t]) - static_cast<double>(logp_rollout[t]));
    out[t] = static_cast<float>(isnan(w) || w < cap ? w : cap);
  }
}

__device__ double clamp_nan(double x, double lo, double hi) { return x < lo ? lo : (x > hi ? hi : x); }

__global__ void k_kl(const float* logp, const float* logp_ref, const uint8_t* mask, int64_t tokens, int kind,
                     float* out) {
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < tokens; t += int64_t(gridDim.x) * blockDim.x) {
    const double lp = logp[t], ref = logp_ref[t];
    double k;
    if (kind == RLG_K1) {
      k = lp - ref;
    } else if (kind == RLG_K2) {
      const double d = lp - ref;
      k = 0.5 * d * d;
    } else {
      const double d = clamp_nan(ref - lp, -20.0, 20.0);
      k = clamp_nan(exp(d) - d - 1.0, -10.0, 10.0);
    }
    out[t] = (mask == nullptr || mask[t] != 0) ? static_cast<float>(k) : 0.0f;
  }
}

}  // namespace

extern "C" {

int rlg_cuda_abi_version(void) { return RLG_CUDA_ABI_VERSION; }

int rlg_cuda_device_count(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

int rlg_cuda_broadcast_rows(const int32_t* offsets, int64_t rows, const double* row_values, const uint8_t* mask,
                            float* out, int64_t tokens) {
  if (tokens == 0) return RLG_OK;
  RLG_CHECK(select_device());
  DeviceBuffer<int32_t> d_off;
  DeviceBuffer<double> d_rv;
  DeviceBuffer<uint8_t> d_mask;
  DeviceBuffer<float> d_out;
  RLG_CHECK(d_off.upload(offsets, rows + 1));
  RLG_CHECK(d_rv.upload(row_values, rows));
  RLG_CHECK(d_mask.upload(mask, tokens));
  RLG_CHECK(d_out.alloc(tokens));
  RLG_LAUNCH(k_broadcast, grid_for(tokens), kThreads, d_off.get(), rows, d_rv.get(), d_mask.get(), d_out.get(),
             tokens);
  RLG_CHECK(cudaGetLastError());
  RLG_CHECK(d_out.download(out, tokens));
  return status_of(sync());
}

int rlg_cuda_gather_tokens(const double* values, int64_t num_values, const int32_t* index, const uint8_t* mask,
                           float* out, int64_t tokens) {
  if (tokens == 0) return RLG_OK;
  RLG_CHECK(select_device());
  DeviceBuffer<double> d_values;
  DeviceBuffer<int32_t> d_index;
  DeviceBuffer<uint8_t> d_mask;
  DeviceBuffer<float> d_out;
  DeviceBuffer<int> d_bad;
  RLG_CHECK(d_values.upload(values, num_values));
  RLG_CHECK(d_index.upload(index, tokens));
  RLG_CHECK(d_mask.upload(mask, tokens));
  RLG_CHECK(d_out.alloc(tokens));
  RLG_CHECK(d_bad.alloc(1));
  RLG_CHECK(cudaMemsetAsync(d_bad.get(), 0, sizeof(int), cudaStreamPerThread));
  RLG_LAUNCH(k_gather, grid_for(tokens), kThreads, d_values.get(), num_values, d_index.get(), d_mask.get(),
             d_out.get(), tokens, d_bad.get());
  RLG_CHECK(cudaGetLastError());
  int bad = 0;
  RLG_CHECK(d_out.download(out, tokens));
  RLG_CHECK(d_bad.download(&bad, 1));
  RLG_CHECK(sync());
  return bad ? RLG_BAD_INDEX : RLG_OK;
}

int rlg_cuda_row_counts(const int32_t* offsets, int64_t rows, const uint8_t* mask, int64_t tokens, int32_t* out) {
  if (rows == 0) return RLG_OK;
  if (tokens == 0) {
    for (int64_t r = 0; r < rows; ++r) out[r] = 0;
    return RLG_OK;
  }
  RLG_CHECK(select_device());
  DeviceBuffer<int32_t> d_off;
  DeviceBuffer<uint8_t> d_mask;
  DeviceBuffer<unsigned long long> d_counts;
  RLG_CHECK(d_off.upload(offsets, rows + 1));
  RLG_CHECK(d_mask.upload(mask, tokens));
  RLG_CHECK(d_counts.alloc(rows));
  RLG_CHECK(cudaMemsetAsync(d_counts.get(), 0, rows * sizeof(unsigned long long), cudaStreamPerThread));
  RLG_LAUNCH(k_row_counts, row_tile_grid(offsets, rows), kThreads, d_off.get(), d_mask.get(), d_counts.get());
  RLG_CHECK(cudaGetLastError());
  std::vector<unsigned long long> counts(rows);
  RLG_CHECK(d_counts.download(counts.data(), rows));
  RLG_CHECK(sync());
  for (int64_t r = 0; r < rows; ++r) out[r] = static_cast<int32_t>(counts[r]);
  return RLG_OK;
}

int rlg_cuda_masked_gae(const int32_t* offsets, int64_t rows, const float* rewards, const double* row_rewards,
                        const float* values, const uint8_t* mask, int64_t tokens, double gamma, double lambda,
                        float* out_advantages, float* out_returns) {
  if (tokens == 0 || rows == 0) return RLG_OK;
  RLG_CHECK(select_device());
  DeviceBuffer<int32_t> d_off;
  DeviceBuffer<float> d_rew, d_val, d_adv, d_ret;
  DeviceBuffer<double> d_row_rew;
  DeviceBuffer<uint8_t> d_mask;
  RLG_CHECK(d_off.upload(offsets, rows + 1));
  RLG_CHECK(d_rew.upload(rewards, tokens));  // null stays null
  RLG_CHECK(d_row_rew.upload(row_rewards, rows));
  RLG_CHECK(d_val.upload(values, tokens));
  RLG_CHECK(d_mask.upload(mask, tokens));
  RLG_CHECK(d_adv.alloc(tokens));
  RLG_CHECK(d_ret.alloc(tokens));
  RLG_LAUNCH(k_gae, static_cast<unsigned>(rows), kThreads, d_off.get(), d_rew.get(), d_row_rew.get(), d_val.get(),
             d_mask.get(), gamma, lambda, d_adv.get(), d_ret.get());
  RLG_CHECK(cudaGetLastError());
  RLG_CHECK(d_adv.download(out_advantages, tokens));
  RLG_CHECK(d_ret.download(out_returns, tokens));
  return status_of(sync());
}

int rlg_cuda_masked_whiten(const int32_t* offsets, int64_t rows, const float* x, const uint8_t* mask, int64_t tokens,
                           const int32_t* row_segment, int64_t num_segments, int shift_mean, int unbiased, double eps,
                           float* out) {
  if (tokens == 0 || rows == 0) return RLG_OK;
  const int64_t nseg = row_segment == nullptr ? 1 : num_segments;
  RLG_CHECK(select_device());
  DeviceBuffer<int32_t> d_off, d_seg;
  DeviceBuffer<float> d_x, d_out;
  DeviceBuffer<uint8_t> d_mask;
  DeviceBuffer<double> d_sum, d_mean, d_inv;
  DeviceBuffer<unsigned long long> d_count;
  RLG_CHECK(d_off.upload(offsets, rows + 1));
  RLG_CHECK(d_x.upload(x, tokens));
  RLG_CHECK(d_mask.upload(mask, tokens));
  RLG_CHECK(d_seg.upload(row_segment, rows));
  RLG_CHECK(d_out.alloc(tokens));
  const int64_t seg_alloc = nseg < 1 ? 1 : nseg;
  RLG_CHECK(d_sum.alloc(seg_alloc));
  RLG_CHECK(d_mean.alloc(seg_alloc));
  RLG_CHECK(d_inv.alloc(seg_alloc));
  RLG_CHECK(d_count.alloc(seg_alloc));
  RLG_CHECK(cudaMemsetAsync(d_sum.get(), 0, seg_alloc * sizeof(double), cudaStreamPerThread));
  RLG_CHECK(cudaMemsetAsync(d_count.get(), 0, seg_alloc * sizeof(unsigned long long), cudaStreamPerThread));
  const dim3 grid = row_tile_grid(offsets, rows);
  RLG_LAUNCH(k_segment_sums, grid, kThreads, d_off.get(), d_x.get(), d_mask.get(), d_seg.get(), nullptr, d_sum.get(),
             d_count.get());
  RLG_CHECK(cudaGetLastError());
  std::vector<double> sum(seg_alloc), mean(seg_alloc), inv(seg_alloc);
  std::vector<unsigned long long> count(seg_alloc);
  RLG_CHECK(d_sum.download(sum.data(), seg_alloc));
  RLG_CHECK(d_count.download(count.data(), seg_alloc));
  RLG_CHECK(sync());
  for (int64_t g = 0; g < seg_alloc; ++g) mean[g] = count[g] > 0 ? sum[g] / static_cast<double>(count[g]) : 0.0;
  RLG_CHECK(cudaMemcpyAsync(d_mean.get(), mean.data(), seg_alloc * sizeof(double), cudaMemcpyHostToDevice,
                            cudaStreamPerThread));
  RLG_CHECK(cudaMemsetAsync(d_sum.get(), 0, seg_alloc * sizeof(double), cudaStreamPerThread));
  RLG_LAUNCH(k_segment_sums, grid, kThreads, d_off.get(), d_x.get(), d_mask.get(), d_seg.get(), d_mean.get(),
             d_sum.get(), nullptr);
  RLG_CHECK(cudaGetLastError());
  RLG_CHECK(d_sum.download(sum.data(), seg_alloc));
  RLG_CHECK(sync());
  for (int64_t g = 0; g < seg_alloc; ++g) {
    const double n = static_cast<double>(count[g]);
    const double var = count[g] > 1 || (!unbiased && count[g] > 0) ? sum[g] / (unbiased ? n - 1.0 : n) : 0.0;
    inv[g] = 1.0 / sqrt(var + eps);
  }
  RLG_CHECK(cudaMemcpyAsync(d_inv.get(), inv.data(), seg_alloc * sizeof(double), cudaMemcpyHostToDevice,
                            cudaStreamPerThread));
  RLG_LAUNCH(k_whiten_write, grid, kThreads, d_off.get(), d_x.get(), d_mask.get(), d_seg.get(), d_mean.get(),
             d_inv.get(), shift_mean, d_out.get());
  RLG_CHECK(cudaGetLastError());
  RLG_CHECK(d_out.download(out, tokens));
  return status_of(sync());
}

int rlg_cuda_importance_weights(const float* logp_old, const float* logp_rollout, const uint8_t* mask, int64_t tokens,
                                double cap, float* out) {
  if (tokens == 0) return RLG_OK;
  RLG_CHECK(select_device());
  DeviceBuffer<float> d_old, d_roll, d_out;
  DeviceBuffer<uint8_t> d_mask;
  RLG_CHECK(d_old.upload(logp_old, tokens));
  RLG_CHECK(d_roll.upload(logp_rollout, tokens));
  RLG_CHECK(d_mask.upload(mask, tokens));
  RLG_CHECK(d_out.alloc(tokens));
  RLG_LAUNCH(k_importance, grid_for(tokens), kThreads, d_old.get(), d_roll.get(), d_mask.get(), tokens, cap,
             d_out.get());
  RLG_CHECK(cudaGetLastError());
  RLG_CHECK(d_out.download(out, tokens));
  return status_of(sync());
}

int rlg_cuda_kl(const float* logp, const float* logp_ref, const uint8_t* mask, int64_t tokens, int kind, float* out) {
  if (tokens == 0) return RLG_OK;
  RLG_CHECK(select_device());
  DeviceBuffer<float> d_lp, d_ref, d_out;
  DeviceBuffer<uint8_t> d_mask;
  RLG_CHECK(d_lp.upload(logp, tokens));
  RLG_CHECK(d_ref.upload(logp_ref, tokens));
  RLG_CHECK(d_mask.upload(mask, tokens));
  RLG_CHECK(d_out.alloc(tokens));
  RLG_LAUNCH(k_kl, grid_for(tokens), kThreads, d_lp.get(), d_ref.get(), d_mask.get(), tokens, kind, d_out.get());
  RLG_CHECK(cudaGetLastError());
  RLG_CHECK(d_out.download(out, tokens));
  return status_of(sync());
}

}  // extern "C"
