// The part of CUDA that kernels.cu uses, emulated on the CPU, so that the CUDA kernels and their host code are
// tested where there is no GPU: kernels.cu compiled as C++ with -DRLG_CUDA_EMULATION includes this instead of
// cuda_runtime.h, and builds an rlgate_cuda.so that cuda_check (or the addon) loads like the real one
// (rl-core/kernels/cuda-emulation.test.ts). It checks the kernels' logic: indexing, tiling, the GAE scan's
// chunk chaining, block reductions, host-side passes. It says nothing of the device's memory model, of races
// between blocks (blocks run one after another) or of speed; native/cuda/gpu-check.sh covers those on a GPU.
//
// "Device" memory is host memory. A block's threads run on one OS thread: as plain calls in turn, or, for a
// kernel that synchronizes (__syncthreads, __shfl_down_sync), as fibers (ucontext) switched at each
// synchronization, every thread running up to its next one before any goes past it. A kernel is first run
// with plain calls; its first synchronization switches it to fibers and restarts the block, which is sound
// because no kernel here writes global memory before its first synchronization.
#pragma once

// Fibers switch with _setjmp/_longjmp (no signal-mask system call per switch, unlike swapcontext); fortified
// builds would check those jumps against the current stack and abort.
#undef _FORTIFY_SOURCE
#include <setjmp.h>
#include <ucontext.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __shared__ static  // one block runs at a time

enum cudaError_t { cudaSuccess = 0, cudaErrorMemoryAllocation = 2, cudaErrorNotSupported = 801 };
enum cudaMemcpyKind { cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2 };
typedef struct rlg_emulated_stream* cudaStream_t;
#define cudaStreamPerThread (reinterpret_cast<cudaStream_t>(0x2))

struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

using std::isnan;
inline int64_t min(int64_t a, int64_t b) { return a < b ? a : b; }

namespace rlg_emulation {

inline dim3 thread_idx, block_idx, block_dim, grid_dim;

// Thrown by a synchronization outside a fiber: the launch reruns the block as fibers.
struct NeedsFibers {};

// A CUDA thread that synchronizes. Fibers live for the process and take one thread of one block after another:
// started once with swapcontext, switched after that with _setjmp/_longjmp.
struct Fiber {
  ucontext_t start;
  jmp_buf at;
  std::unique_ptr<char[]> stack;  // not zeroed: its pages are touched only as the fiber uses them
  bool started = false;
  bool done = false;
};

inline jmp_buf scheduler;
// One launch at a time, whatever the kernel: the emulation's state is global, and async kernels launch from
// several threads.
inline std::mutex launch_mutex;
inline std::set<void*> synchronizing_kernels;  // kernels known to need fibers
inline Fiber* running = nullptr;  // null: plain calls
inline std::function<void()> thread_body;
inline uint64_t shuffle_slots[1024];

inline void yield_to_scheduler() {
  if (_setjmp(running->at) == 0) _longjmp(scheduler, 1);
}

inline void fiber_main() {
  for (;;) {
    thread_body();
    running->done = true;
    yield_to_scheduler();
  }
}

inline void resume(Fiber& fiber) {
  running = &fiber;
  if (_setjmp(scheduler) == 0) {
    if (fiber.started) _longjmp(fiber.at, 1);
    fiber.started = true;
    ucontext_t here;
    swapcontext(&here, &fiber.start);  // runs until the fiber's first yield, which jumps to `scheduler`
  }
  running = nullptr;
}

inline void sync_threads() {
  if (running == nullptr) throw NeedsFibers{};
  yield_to_scheduler();
}

// Runs one block: every thread as a plain call, or as fibers in rounds (one synchronization per round).
inline void run_block(bool fibers) {
  const unsigned n = block_dim.x;
  if (!fibers) {
    for (unsigned i = 0; i < n; ++i) {
      thread_idx = dim3(i, 0, 0);
      thread_body();
    }
    return;
  }
  static std::vector<Fiber> pool(1024);
  for (unsigned i = 0; i < n; ++i) {
    Fiber& f = pool[i];
    f.done = false;
    if (!f.stack) {
      constexpr size_t kStack = 256 * 1024;
      f.stack.reset(new char[kStack]);
      getcontext(&f.start);
      f.start.uc_stack.ss_sp = f.stack.get();
      f.start.uc_stack.ss_size = kStack;
      f.start.uc_link = nullptr;  // fiber_main never returns
      makecontext(&f.start, fiber_main, 0);
    }
  }
  for (bool left = true; left;) {
    left = false;
    for (unsigned i = 0; i < n; ++i) {
      if (pool[i].done) continue;
      thread_idx = dim3(i, 0, 0);
      resume(pool[i]);
      left |= !pool[i].done;
    }
  }
}

// kernel<<<grid, block>>>(args...), run to completion.
template <class... Params, class... Args>
void launch(dim3 grid, dim3 block, void (*kernel)(Params...), Args... args) {
  std::lock_guard<std::mutex> lock(launch_mutex);
  grid_dim = grid;
  block_dim = block;
  thread_body = [&] { kernel(static_cast<Params>(args)...); };
  bool fibers = synchronizing_kernels.count(reinterpret_cast<void*>(kernel)) != 0;
  for (unsigned y = 0; y < grid.y; ++y) {
    for (unsigned x = 0; x < grid.x; ++x) {
      block_idx = dim3(x, y, 0);
      try {
        run_block(fibers);
      } catch (const NeedsFibers&) {
        fibers = true;
        synchronizing_kernels.insert(reinterpret_cast<void*>(kernel));
        run_block(true);
      }
    }
  }
}

}  // namespace rlg_emulation

#define threadIdx (rlg_emulation::thread_idx)
#define blockIdx (rlg_emulation::block_idx)
#define blockDim (rlg_emulation::block_dim)
#define gridDim (rlg_emulation::grid_dim)
#define __syncthreads() rlg_emulation::sync_threads()
#define RLG_LAUNCH(kernel, grid, block, ...) rlg_emulation::launch(grid, block, kernel, __VA_ARGS__)

// Every thread of the block calls it (as CUDA requires of a full mask); lanes past the warp's end keep their value.
template <class T>
T __shfl_down_sync(unsigned, T value, int delta) {
  static_assert(sizeof(T) <= sizeof(uint64_t), "shuffle of a type wider than 64 bits");
  const unsigned me = threadIdx.x;
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  rlg_emulation::shuffle_slots[me] = bits;
  rlg_emulation::sync_threads();
  T out = value;
  if ((me & 31u) + static_cast<unsigned>(delta) < 32u) std::memcpy(&out, &rlg_emulation::shuffle_slots[me + delta], sizeof(T));
  rlg_emulation::sync_threads();
  return out;
}

// Blocks and threads run one at a time: plain read-modify-write.
template <class T>
T atomicAdd(T* address, T value) {
  const T old = *address;
  *address = old + value;
  return old;
}
inline int atomicOr(int* address, int value) {
  const int old = *address;
  *address = old | value;
  return old;
}

inline cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}
inline cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : cudaErrorNotSupported; }
inline cudaError_t cudaGetLastError() { return cudaSuccess; }
inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
inline cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  *ptr = std::malloc(bytes);
  return *ptr != nullptr ? cudaSuccess : cudaErrorMemoryAllocation;
}
inline cudaError_t cudaMallocAsync(void** ptr, size_t bytes, cudaStream_t) { return cudaMalloc(ptr, bytes); }
inline cudaError_t cudaFree(void* ptr) {
  std::free(ptr);
  return cudaSuccess;
}
inline cudaError_t cudaFreeAsync(void* ptr, cudaStream_t) { return cudaFree(ptr); }
inline cudaError_t cudaMemcpyAsync(void* to, const void* from, size_t bytes, cudaMemcpyKind, cudaStream_t) {
  std::memcpy(to, from, bytes);
  return cudaSuccess;
}
inline cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t) {
  std::memset(ptr, value, bytes);
  return cudaSuccess;
}
