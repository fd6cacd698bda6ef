#!/bin/sh
# Builds the CUDA kernel library (rlgate_cuda.so) next to the addon. Called by binding.gyp's
# `rlgate_cuda` target. It never fails the addon build: without nvcc, with RLGATE_CUDA=0, or when nvcc
# fails, it says so and leaves no library, and the addon runs on the CPU.
# The CUDA runtime is linked statically, so the library needs only libc and, at run time, a driver.
#   RLGATE_CUDA_ARCHS  SASS targets (default "80 90": A100, H100/H200); PTX for compute_75 is always added
#                      so GPUs without SASS here (T4, L4, Blackwell...) JIT-compile it at first use.
set -u
stamp="$1"
out="$(dirname "$stamp")/rlgate_cuda.so"
src="$(cd "$(dirname "$0")" && pwd)/kernels.cu"
: >"$stamp"
rm -f "$out"
if [ "${RLGATE_CUDA:-1}" = "0" ]; then
  echo "rlgate: RLGATE_CUDA=0, CUDA kernels not built"
  exit 0
fi
nvcc_bin="${NVCC:-$(command -v nvcc || true)}"
if [ -z "$nvcc_bin" ]; then
  echo "rlgate: nvcc not found, CUDA kernels not built (CPU kernels only)"
  exit 0
fi
gencode="-gencode arch=compute_75,code=compute_75"
for a in ${RLGATE_CUDA_ARCHS:-80 90}; do
  gencode="$gencode -gencode arch=compute_$a,code=sm_$a"
done
# shellcheck disable=SC2086
if "$nvcc_bin" -O3 -std=c++17 -shared -Xcompiler -fPIC,-fvisibility=hidden -cudart static $gencode \
  -o "$out.tmp" "$src" -ldl -lrt -lpthread; then
  mv "$out.tmp" "$out"
  echo "rlgate: built $out"
else
  rm -f "$out.tmp"
  echo "rlgate: nvcc failed, CUDA kernels not built (CPU kernels only)" >&2
fi
exit 0
