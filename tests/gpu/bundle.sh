#!/usr/bin/env bash
# Packs the GPU checks of a CUDA build for a GPU machine that lacks the build's dependencies (GoogleTest,
# libfabric, hwloc development packages): the test and benchmark executables, libconflux and every shared
# library they load that is not part of the C runtime, compiler runtime or CUDA driver.
#
#   tests/gpu/bundle.sh BUILD_DIR OUT_DIR      then: tests/gpu/run-on-gpu.sh --prebuilt OUT_DIR
set -euo pipefail
build=${1:?build dir}; out=${2:?output dir}
mkdir -p "$out/bin" "$out/lib"
bins=(tests/gpu/test_cuda_kernels tests/gpu/test_device_collectives perf/micro/conflux-cuda-bench
      perf/conflux_perf/conflux-perf)
for b in "${bins[@]}"; do cp "$build/$b" "$out/bin/"; done
# The net plugin for tests/gpu/nccl-e2e.sh (NCCL loads it from LD_LIBRARY_PATH); its own dependencies
# are gathered below with the executables'.
[[ -f $build/plugin/libnccl-net-conflux.so ]] && cp "$build/plugin/libnccl-net-conflux.so" "$out/lib/"
# The loader's own libraries and the compiler runtime exist on every Linux machine (newer ones are
# compatible); libcuda comes with the GPU driver.
system='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|librt\.|libpthread\.|libstdc\+\+|libgcc_s|libcuda\.)'
for b in "$out"/bin/* "$out"/lib/libnccl-net-conflux.so; do
  [[ -f $b ]] || continue
  ldd "$b" | awk '$3 ~ /^\// {print $1, $3}' | while read -r name path; do
    [[ $name =~ $system ]] || cp -L "$path" "$out/lib/$name"
  done
done
du -sh "$out"
