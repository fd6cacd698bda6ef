// Finds and loads rlgate_cuda.so (next to the addon) on first use. No CUDA headers or libraries needed.
#ifndef RLGATE_CUDA_LOADER_H
#define RLGATE_CUDA_LOADER_H

#include "cuda_api.h"

namespace rlgate {

struct CudaApi {
  decltype(&rlg_cuda_device_count) device_count;
  decltype(&rlg_cuda_broadcast_rows) broadcast_rows;
  decltype(&rlg_cuda_gather_tokens) gather_tokens;
  decltype(&rlg_cuda_row_counts) row_counts;
  decltype(&rlg_cuda_masked_gae) masked_gae;
  decltype(&rlg_cuda_masked_whiten) masked_whiten;
  decltype(&rlg_cuda_importance_weights) importance_weights;
  decltype(&rlg_cuda_kl) kl;
};

enum CudaLibraryState { kCudaLibraryAbsent = 0, kCudaLibraryLoaded = 1, kCudaLibraryBroken = 2 };

// nullptr unless the library was found and every symbol resolved. Thread-safe.
const CudaApi* cuda_api();
int cuda_library_state();
// Devices the library sees (0 without library, driver or device); probed once.
int cuda_device_count();

}  // namespace rlgate

#endif
