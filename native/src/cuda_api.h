// The C API of the CUDA kernel library (native/cuda/kernels.cu -> build/Release/rlgate_cuda.so).
// Plain C types only: the library is built by nvcc without napi.h, and the addon loads it with dlopen at
// run time, so the addon itself never links the CUDA runtime and loads on machines without CUDA.
// All pointers are host pointers; each call copies to the device, runs, and copies back.
// Inputs are validated by the caller (offsets, lengths), except indices, which the device checks.
#ifndef RLGATE_CUDA_API_H
#define RLGATE_CUDA_API_H

#include <stdint.h>

#define RLG_CUDA_ABI_VERSION 2  // 2: masked_gae takes row rewards

// The library is built with -fvisibility=hidden; only this API is exported.
#if defined(__GNUC__)
#define RLG_CUDA_API __attribute__((visibility("default")))
#else
#define RLG_CUDA_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

RLG_CUDA_API int rlg_cuda_abi_version(void);
// Number of usable CUDA devices; 0 when there is no driver or no device.
RLG_CUDA_API int rlg_cuda_device_count(void);

RLG_CUDA_API int rlg_cuda_broadcast_rows(const int32_t* offsets, int64_t rows, const double* row_values, const uint8_t* mask,
                            float* out, int64_t tokens);
RLG_CUDA_API int rlg_cuda_gather_tokens(const double* values, int64_t num_values, const int32_t* index, const uint8_t* mask,
                           float* out, int64_t tokens);
RLG_CUDA_API int rlg_cuda_row_counts(const int32_t* offsets, int64_t rows, const uint8_t* mask, int64_t tokens, int32_t* out);
RLG_CUDA_API int rlg_cuda_masked_gae(const int32_t* offsets, int64_t rows, const float* rewards, const double* row_rewards,
                        const float* values, const uint8_t* mask, int64_t tokens, double gamma, double lambda,
                        float* out_advantages, float* out_returns);
RLG_CUDA_API int rlg_cuda_masked_whiten(const int32_t* offsets, int64_t rows, const float* x, const uint8_t* mask, int64_t tokens,
                           const int32_t* row_segment, int64_t num_segments, int shift_mean, int unbiased, double eps,
                           float* out);
RLG_CUDA_API int rlg_cuda_importance_weights(const float* logp_old, const float* logp_rollout, const uint8_t* mask, int64_t tokens,
                                double cap, float* out);
RLG_CUDA_API int rlg_cuda_kl(const float* logp, const float* logp_ref, const uint8_t* mask, int64_t tokens, int kind, float* out);

#ifdef __cplusplus
}
#endif

#endif
