// Runs the CUDA GAE kernel (gae_kernel.cuh) on the CPU and compares it with the CPU kernel, on random ragged
// batches: token rewards, row rewards, both, rows ending in context, empty rows, and gamma * lambda > 1 over a
// 300k-token row. Each CUDA thread is a std::thread, __syncthreads a barrier, __shared__ a static (blocks run
// one after another). So the scan's logic is checked where no GPU is (rl-core/kernels/cuda.test.ts builds and
// runs this); it says nothing of the device's memory model or speed, which gpu-check.sh covers on a GPU.
//   g++ -O2 -std=c++20 -fopenmp-simd native/cuda/gae_emulation.cc native/src/kernels.cc native/src/cuda_loader.cc -ldl -lpthread
#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <thread>
#include <vector>

#include "../src/kernels.h"

namespace emulated {

constexpr int kThreads = 256;
struct Dim3 {
  unsigned x = 0, y = 0, z = 0;
};
thread_local Dim3 threadIdx;
thread_local Dim3 blockIdx;
std::barrier<>* block_barrier = nullptr;
inline int64_t min(int64_t a, int64_t b) { return a < b ? a : b; }

#define __global__
#define __shared__ static
#define __syncthreads() block_barrier->arrive_and_wait()
#include "gae_kernel.cuh"
#undef __global__
#undef __shared__
#undef __syncthreads

// One launch: kThreads threads take the blocks (one per row) in turn, with a barrier between blocks, as
// the block's shared memory (statics here) is reused by the next.
void launch_gae(const rlgate::GaeArgs& a) {
  std::barrier<> barrier(kThreads);
  block_barrier = &barrier;
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&a, &barrier, i] {
      threadIdx.x = static_cast<unsigned>(i);
      for (int64_t r = 0; r < a.rows; ++r) {
        blockIdx.x = static_cast<unsigned>(r);
        k_gae(a.offsets, a.rewards, a.row_rewards, a.values, a.mask, a.gamma, a.lambda, a.out_advantages,
              a.out_returns);
        barrier.arrive_and_wait();
      }
    });
  }
  for (auto& t : threads) t.join();
}

}  // namespace emulated

int main() {
  std::mt19937 gen(3);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  int64_t mismatches = 0, compared = 0;
  const int trials = 40;
  for (int trial = 0; trial < trials; ++trial) {
    const bool overflow = trial == trials - 1;  // gamma * lambda = 2 over 300k tokens, all zero: A = 0, not NaN
    const int rows = overflow ? 1 : 1 + trial % 7;
    std::vector<int32_t> offsets{0};
    for (int r = 0; r < rows; ++r) {
      const int len = overflow ? 300000 : u(gen) < 0.15 ? 0 : static_cast<int>(u(gen) * (trial % 3 == 0 ? 3000 : 600));
      offsets.push_back(offsets.back() + len);
    }
    const int64_t tokens = offsets.back();
    std::vector<uint8_t> mask(tokens);
    int on = 1;
    for (int64_t t = 0; t < tokens; ++t) {
      if (!overflow && u(gen) < 0.02) on ^= 1;
      mask[t] = static_cast<uint8_t>(on);
    }
    for (int r = 0; r < rows && !overflow; ++r) {  // some rows end in context (the row reward enters before it)
      if (u(gen) < 0.3) std::fill(mask.begin() + std::max(offsets[r], offsets[r + 1] - 40), mask.begin() + offsets[r + 1], 0);
    }
    std::vector<float> rewards(tokens), values(tokens);
    std::vector<double> row_rewards(rows);
    for (auto& x : rewards) x = !overflow && u(gen) < 0.05 ? static_cast<float>(u(gen)) : 0.0f;
    for (auto& x : values) x = overflow ? 0.0f : static_cast<float>(u(gen) * 2 - 1);
    for (auto& x : row_rewards) x = u(gen) * 4 - 2;
    const bool token_rewards = trial % 2 == 1, with_row_rewards = trial % 4 != 1 && !overflow;
    std::vector<float> cpu_adv(tokens), cpu_ret(tokens), emu_adv(tokens, NAN), emu_ret(tokens, NAN);
    rlgate::GaeArgs a{offsets.data(), rows, token_rewards ? rewards.data() : nullptr,
                      with_row_rewards ? row_rewards.data() : nullptr, values.data(), mask.data(), tokens,
                      overflow ? 2.0 : 0.99, overflow ? 1.0 : 0.95, cpu_adv.data(), cpu_ret.data()};
    rlgate::Exec cpu;
    cpu.threads = 1;
    cpu.device = 0;
    if (rlgate::masked_gae(a, cpu) != 0) {
      std::printf("the CPU kernel failed on trial %d\n", trial);
      return 1;
    }
    rlgate::GaeArgs e = a;
    e.out_advantages = emu_adv.data();
    e.out_returns = emu_ret.data();
    emulated::launch_gae(e);
    for (int64_t t = 0; t < tokens; ++t) {
      for (auto [want, got] : {std::pair{cpu_adv[t], emu_adv[t]}, std::pair{cpu_ret[t], emu_ret[t]}}) {
        ++compared;
        const double tolerance = 1e-5 * std::max(1.0, std::fabs(static_cast<double>(want)));
        if (want == got || std::fabs(static_cast<double>(want) - got) <= tolerance) continue;
        if (++mismatches <= 5) {
          std::printf("trial %d (rows %d, token rewards %d, row rewards %d) token %ld: cpu %.9g, cuda kernel %.9g\n",
                      trial, rows, token_rewards, with_row_rewards, static_cast<long>(t), want, got);
        }
      }
    }
  }
  std::printf("CUDA GAE kernel emulated on the CPU: %ld values over %d batches, %ld differ from the CPU kernel\n",
              static_cast<long>(compared), trials, static_cast<long>(mismatches));
  return mismatches == 0 ? 0 : 1;
}
