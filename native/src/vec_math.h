// Branch-free math that vectorizes inside `#pragma omp simd` loops (libm's exp is an opaque call).
// Needs -fno-trapping-math (set in binding.gyp) for GCC to turn the selects into blends.
#ifndef RLGATE_VEC_MATH_H
#define RLGATE_VEC_MATH_H

#include <cmath>
#include <cstdint>

// Function clones for AVX2 next to the baseline, picked at load time (GNU ifunc), so one binary runs
// everywhere and uses 4-wide doubles where the CPU has them.
#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__)
#define RLG_SIMD_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define RLG_SIMD_CLONES
#endif

namespace rlgate {

// exp(x) in double: exact range reduction x = n ln2 + r, |r| <= ln2/2, then a degree-13 Taylor polynomial
// (truncation error < 5e-18 relative) and 2^n from exponent bits. Within a few ulp of libm; x > 709 gives
// +inf, x < -708 gives 0 (below float's range either way), NaN gives NaN.
inline double exp_vec(double x) {
  const double kLog2e = 1.4426950408889634;
  const double kLn2Hi = 6.93147180369123816490e-01;
  const double kLn2Lo = 1.90821492927058770002e-10;
  const double kShift = 6755399441055744.0;  // 1.5 * 2^52: adding it rounds to an integer in the low bits
  // Selects written one per statement, which GCC if-converts (nested ones it did not).
  double xc = x < -708.0 ? -708.0 : x;
  xc = xc > 709.0 ? 709.0 : xc;
  double kd = xc * kLog2e + kShift;
  const uint64_t ki = __builtin_bit_cast(uint64_t, kd);
  kd -= kShift;
  const double r = (xc - kd * kLn2Hi) - kd * kLn2Lo;
  double p = 1.0 / 6227020800.0;  // 1/13!
  p = p * r + 1.0 / 479001600.0;
  p = p * r + 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  const uint64_t bits = (ki + 1023u) << 52;  // low bits of ki hold n; n + 1023 in [1, 2046] here
  const double scale = __builtin_bit_cast(double, bits);
  double y = p * scale;
  y = x > 709.0 ? HUGE_VAL : y;
  y = x < -708.0 ? 0.0 : y;
  y = x != x ? x : y;
  return y;
}

}  // namespace rlgate

#endif
