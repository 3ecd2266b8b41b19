#!/usr/bin/env bash
# The CUDA kernel checks on a GPU machine: builds only what they need (CUDA on), runs the gpu-labelled
# tests (in parallel: one GPU is enough) and the kernel benchmark. A skipped test counts as a failure
# here: on a GPU machine nothing may skip.
#
#   tools/gpu-check.sh [build-dir] [cuda-arch]      defaults: build-gpu, 90
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build-gpu}"
arch="${2:-90}"
jobs=$(nproc)

cmake -B "$build" -DCONFLUX_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$arch" -DCONFLUX_WARNINGS_AS_ERRORS=ON \
  -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j "$jobs" --target test_cuda_kernels conflux-cuda-bench

echo "== ctest -L gpu"
ctest --test-dir "$build" -L gpu -j "$jobs" --output-on-failure | tee "$build/gpu-tests.log"
if grep -q "(Skipped)" "$build/gpu-tests.log"; then
  echo "gpu-check: tests were skipped on a machine that should have a GPU" >&2
  exit 1
fi

echo "== conflux-cuda-bench"
"$build/perf/micro/conflux-cuda-bench"
