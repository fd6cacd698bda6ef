#!/usr/bin/env bash
# The GPU check, for a machine with an NVIDIA GPU and nvcc (e.g. a lent H200). From the repo root:
#   bash native/cuda/gpu-check.sh
# 1. builds rlgate_cuda.so (SASS for sm_90 only unless RLGATE_CUDA_ARCHS says otherwise: quick to build);
# 2. builds and runs native/cuda/cuda_check: every CUDA token kernel against the CPU kernels (which the
#    Node tests hold to the TypeScript reference) on ragged batches, then a CUDA bench line;
# 3. where Node.js and node_modules exist: rebuilds the addon, runs the CUDA and native Node tests with
#    RLGATE_REQUIRE_CUDA=1 (a skip is a failure) and the full kernel bench.
# Exits non-zero on any mismatch, on a missing GPU, or on a failed test. Takes about a minute.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=native/build/Release
mkdir -p "$out"
export RLGATE_CUDA_ARCHS="${RLGATE_CUDA_ARCHS:-90}"

echo "== GPU"
nvidia-smi -L || echo "(nvidia-smi unavailable)"
command -v nvcc >/dev/null || { echo "nvcc not found: this check needs the CUDA compiler"; exit 1; }
nvcc --version | tail -1

echo "== build rlgate_cuda.so (sm_$RLGATE_CUDA_ARCHS)"
time sh native/cuda/build.sh "$out/rlgate_cuda.stamp"
test -f "$out/rlgate_cuda.so" || { echo "rlgate_cuda.so was not built"; exit 1; }

echo "== CUDA vs CPU kernels (stand-alone, no Node needed)"
${CXX:-g++} -O3 -std=c++17 -fopenmp-simd -ffp-contract=off -fno-trapping-math -Wno-psabi \
  native/cuda/cuda_check.cc native/src/kernels.cc native/src/cuda_loader.cc -ldl -lpthread -o "$out/cuda_check"
"$out/cuda_check"

if command -v node >/dev/null && [ -d node_modules/tsx ] && [ -d node_modules/node-addon-api ]; then
  echo "== addon + Node tests (RLGATE_REQUIRE_CUDA=1)"
  npm run build:native
  RLGATE_REQUIRE_NATIVE=1 RLGATE_REQUIRE_CUDA=1 node scripts/run-tests.mjs rl-core/kernels/cuda rl-core/kernels/native rl-core/estimators
  echo "== bench"
  npx tsx bench/kernels.ts --repeat 3
else
  echo "== Node.js or node_modules missing here: Node tests and bench skipped (cuda_check covered the kernels)"
fi
echo "== GPU check passed"
