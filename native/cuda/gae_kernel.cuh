// The GAE kernel, in a file of its own: kernels.cu includes it for the GPU, and gae_emulation.cc includes it
// for the CPU (one std::thread per CUDA thread, a barrier for __syncthreads), so that its logic is tested on
// machines without a GPU. It therefore uses nothing of CUDA but __global__, __shared__, __syncthreads,
// threadIdx, blockIdx and min; the includer defines kThreads.
#pragma once

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
