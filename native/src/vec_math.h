// SIMD building blocks for the CPU kernels: run-time choice of instruction set, a float exp that
// vectorizes (libm's exp is an opaque call), and small fixed-width vectors for the loops the
// auto-vectorizer does not handle (scans, floating-point reductions).
// Needs -fno-trapping-math (set in binding.gyp) for GCC to turn selects into blends.
#ifndef RLGATE_VEC_MATH_H
#define RLGATE_VEC_MATH_H

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <utility>

namespace rlgate {

// ---- Instruction sets, chosen at run time ----
//
// Each hot loop is compiled three times, for x86-64-v4 (AVX-512), x86-64-v3 (AVX2 + FMA) and the x86-64
// baseline (SSE2), and simd_isa() picks one once per process: what the CPU supports, capped by
// RLGATE_SIMD=avx2|base (so tests can run the narrower versions on a wider machine). One binary, no
// -march=native. Other architectures compile the baseline version only.
//
// Manual dispatch rather than GCC's target_clones: the loops are templates on the vector width, so each
// instruction set gets vectors of its native width (8 doubles in a zmm, 4 in a ymm, 2 in an xmm); GCC
// lowers a wider-than-native vector type's selects to scalar code. And GCC lowers
// `#pragma omp simd reduction` before cloning, at the baseline's width, so the AVX-512 clone of a reduction
// loop came out scalar.
enum SimdIsa { kIsaBase = 0, kIsaAvx2 = 1, kIsaAvx512 = 2 };
int simd_isa();  // kernels.cc (declared in kernels.h too)

// GCC's vector extensions (__builtin_shuffle, vector ?:) for the scans and reductions below; other
// compilers (clang: macOS) get the plain loops, one token at a time. RLG_NO_VECTOR_EXT forces those, to
// test them.
#if defined(__GNUC__) && !defined(__clang__) && !defined(RLG_NO_VECTOR_EXT)
#define RLG_VECTOR_EXT 1
#else
#define RLG_VECTOR_EXT 0
#endif

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define RLG_HAVE_ISA_VERSIONS 1
#define RLG_TARGET_AVX512 __attribute__((target("arch=x86-64-v4")))
#define RLG_TARGET_AVX2 __attribute__((target("arch=x86-64-v3")))
#else
#define RLG_HAVE_ISA_VERSIONS 0
#endif

// A loop body as `template <int W> static R run(args)` of a struct K, W the lanes of double in a native
// vector; always inlined, so it is compiled for the instruction set of the wrapper that calls it.
#define RLG_INLINE __attribute__((always_inline)) inline

#if RLG_HAVE_ISA_VERSIONS
template <class K, class... A>
RLG_TARGET_AVX512 auto run_avx512(A... a) {
  return K::template run<8>(a...);
}
template <class K, class... A>
RLG_TARGET_AVX2 auto run_avx2(A... a) {
  return K::template run<4>(a...);
}
#endif
template <class K, class... A>
auto run_base(A... a) {
  return K::template run<2>(a...);
}

// K::run<W>(a...) for the instruction set simd_isa() chose.
template <class K, class... A>
auto dispatch(A... a) {
#if RLG_HAVE_ISA_VERSIONS
  const int isa = simd_isa();
  if (isa == kIsaAvx512) return run_avx512<K>(a...);
  if (isa == kIsaAvx2) return run_avx2<K>(a...);
#endif
  return run_base<K>(a...);
}

// ---- exp in float ----
//
// Range reduction x = n ln2 + r with |r| <= ln2/2 (Cody-Waite, ln2 split so that n * kLn2Hi is exact), then
// e^r = 1 + r + q with q = r^2 P(r), P of degree 5 (Cephes' expf minimax coefficients, < 1.7e-7 relative
// over the reduced range). Float because every caller reads and writes float: 16 lanes per AVX-512
// instruction instead of 8 doubles, and a degree-7 polynomial instead of the degree 13 a double result
// needs.
struct ExpParts {
  int32_t n;  // e^x = 2^n (1 + r + q)
  float r;
  float q;  // e^r - 1 - r, computed without cancellation (k3 KL needs it)
};

// For x in [-104, 89] (callers clamp; the clamp is not in here because GCC compiles a chain of selects,
// these and a caller's, into slow predicated code). NaN gives NaN r and q (and a meaningless n).
RLG_INLINE ExpParts exp_parts(float xc) {
  const float kLog2e = 1.44269504088896341f;
  const float kLn2Hi = 0.693359375f;  // 8 significant bits: n * kLn2Hi is exact for |n| < 2^16
  const float kLn2Lo = -2.12194440e-4f;
  const float kShift = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer held in the low bits
  float kd = xc * kLog2e + kShift;
  const int32_t n = static_cast<int32_t>(__builtin_bit_cast(uint32_t, kd) - __builtin_bit_cast(uint32_t, kShift));
  kd -= kShift;
  const float r = (xc - kd * kLn2Hi) - kd * kLn2Lo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  return {n, r, p * (r * r)};
}

// 2^n as a float for n in [-126, 127] (unsigned arithmetic: no overflow whatever n holds).
RLG_INLINE float pow2i(int32_t n) { return __builtin_bit_cast(float, (static_cast<uint32_t>(n) + 127u) << 23); }

// e^x in float, within 1 ulp of the correctly rounded result over the whole range (checked against double
// exp on a 2e7-point grid of [-105, 95]). Overflows to +inf above ~88.72, gives float denormals down to
// ~-103.3 and 0 below. NaN propagates through the arithmetic (the clamps keep it), so no select is spent on
// it: written with one, GCC's if-conversion of the clamps and the NaN test together produced predicated
// code twice as slow.
RLG_INLINE float exp_f32(float x) {
  // Beyond [-104, 89] float exp is 0 or +inf anyway, and 2^n stays in range of the scaling below. The
  // selects let NaN through (a comparison with NaN is false).
  float xc = x < -104.0f ? -104.0f : x;
  xc = xc > 89.0f ? 89.0f : xc;
  const ExpParts e = exp_parts(xc);
  // 2^n in two factors, each a normal float for n in [-150, 128]: the result rounds once, into the
  // denormal range where it falls there, and overflows to inf above float's range.
  const int32_t n1 = e.n >> 1;
  return ((1.0f + (e.r + e.q)) * pow2i(n1)) * pow2i(e.n - n1);
}

#if RLG_VECTOR_EXT
// ---- W-lane vectors (GCC vector extensions) ----
//
// Tokens are float, arithmetic double: Vec<W>::d holds W doubles, one native register at the W the
// dispatcher passes. The helpers take and return vectors but are always inlined, so the ABI of passing
// them (GCC's -Wpsabi note) never applies; binding.gyp passes -Wno-psabi, and this covers other builds.
#pragma GCC diagnostic ignored "-Wpsabi"

template <int W>
struct Vec {
  typedef double d __attribute__((vector_size(W * sizeof(double))));
  typedef int64_t i __attribute__((vector_size(W * sizeof(int64_t))));
  typedef uint64_t u __attribute__((vector_size(W * sizeof(uint64_t))));
  typedef float f __attribute__((vector_size(W * sizeof(float))));
};

template <int W>
RLG_INLINE typename Vec<W>::d load_f32(const float* p) {
  typename Vec<W>::f f;
  __builtin_memcpy(&f, p, sizeof f);
  return __builtin_convertvector(f, typename Vec<W>::d);
}

template <int W>
RLG_INLINE void store_f32(float* p, typename Vec<W>::d x) {
  const auto f = __builtin_convertvector(x, typename Vec<W>::f);
  __builtin_memcpy(p, &f, sizeof f);
}

// The W mask bytes at p as one integer (byte i in bits 8i..8i+7).
template <int W>
RLG_INLINE uint64_t mask_bytes(const uint8_t* p) {
  uint64_t bytes = 0;
  __builtin_memcpy(&bytes, p, W);
  return bytes;
}

// Whether all W bytes of mask_bytes<W> are non-zero (the classic has-a-zero-byte test, negated).
template <int W>
RLG_INLINE bool all_nonzero(uint64_t bytes) {
  const uint64_t low = ~uint64_t{0} >> (64 - 8 * W) & 0x0101010101010101ull;
  return ((bytes - low) & ~bytes & (low << 7)) == 0;
}

// -1 in lane i where mask byte i is non-zero, else 0: the bytes broadcast, lane i shifted down by 8i bits,
// tested (a byte-to-int64 vector conversion compiled to W scalar extracts instead).
template <int W, std::size_t... I>
RLG_INLINE typename Vec<W>::i mask_lanes_impl(uint64_t bytes, std::index_sequence<I...>) {
  using Vu = typename Vec<W>::u;
  const Vu lanes = (Vu{} + bytes) >> Vu{(8 * I)...};
  return (typename Vec<W>::i)((lanes & 0xff) != 0);
}
template <int W>
RLG_INLINE typename Vec<W>::i mask_lanes(uint64_t bytes) {
  return mask_lanes_impl<W>(bytes, std::make_index_sequence<W>{});
}

// Lane i gets lane i + S of x; lanes past the end get `fill` (a splat).
template <int S, class V, std::size_t... I>
RLG_INLINE V up_impl(V x, V fill, std::index_sequence<I...>) {
  typedef int64_t Vi __attribute__((vector_size(sizeof(V))));
  return __builtin_shuffle(x, fill, Vi{static_cast<int64_t>(S + I)...});
}
template <int S, class V>
RLG_INLINE V up(V x, V fill) {
  return up_impl<S>(x, fill, std::make_index_sequence<sizeof(V) / 8>{});
}

template <int W>
RLG_INLINE double sum(typename Vec<W>::d x) {
  double s = 0.0;
  for (int i = 0; i < W; ++i) s += x[i];
  return s;
}
#endif  // RLG_VECTOR_EXT

}  // namespace rlgate

#endif
