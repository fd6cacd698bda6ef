// Splitting work over std::thread: contiguous token ranges, or row ranges balanced by token count.
// Threads are started per call; a call below kMinTokensPerThread tokens per thread uses fewer threads.
#ifndef RLGATE_PARALLEL_H
#define RLGATE_PARALLEL_H

#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

namespace rlgate {

constexpr int64_t kMinTokensPerThread = 1 << 15;

inline int clamp_threads(int requested, int64_t work) {
  int64_t by_work = std::max<int64_t>(1, work / kMinTokensPerThread);
  int64_t t = std::max(1, requested);
  return static_cast<int>(std::min(t, by_work));
}

// fn(worker, begin, end) on `threads` contiguous pieces of [0, n); worker 0 runs on the calling thread.
template <class Fn>
void parallel_ranges(int64_t n, int threads, Fn&& fn) {
  if (threads <= 1 || n <= 1) {
    fn(0, int64_t{0}, n);
    return;
  }
  std::vector<std::thread> pool;
  pool.reserve(threads - 1);
  for (int w = 1; w < threads; ++w) {
    int64_t b = n * w / threads, e = n * (w + 1) / threads;
    pool.emplace_back([&fn, w, b, e] { fn(w, b, e); });
  }
  fn(0, int64_t{0}, n / threads);
  for (auto& t : pool) t.join();
}

// fn(worker, row_begin, row_end) on `threads` row ranges holding about the same number of tokens each.
template <class Fn>
void parallel_rows(const int32_t* offsets, int64_t rows, int threads, Fn&& fn) {
  if (threads <= 1 || rows <= 1) {
    fn(0, int64_t{0}, rows);
    return;
  }
  const int64_t tokens = offsets[rows];
  std::vector<int64_t> cut(threads + 1, rows);
  cut[0] = 0;
  for (int w = 1; w < threads; ++w) {
    int64_t target = tokens * w / threads;
    int64_t r = std::lower_bound(offsets, offsets + rows + 1, target) - offsets;
    cut[w] = std::max(cut[w - 1], std::min(r, rows));
  }
  std::vector<std::thread> pool;
  pool.reserve(threads - 1);
  for (int w = 1; w < threads; ++w) {
    int64_t b = cut[w], e = cut[w + 1];
    if (b < e) pool.emplace_back([&fn, w, b, e] { fn(w, b, e); });
  }
  fn(0, cut[0], cut[1]);
  for (auto& t : pool) t.join();
}

}  // namespace rlgate

#endif
