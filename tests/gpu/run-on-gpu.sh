#!/usr/bin/env bash
# The GPU checks in one go, for a machine with an NVIDIA GPU (about 5 minutes on one H200): the CUDA
# kernels against the CPU reference, the kernel benchmark (reduce vs device-to-device copy), a missing
# peer that must time out, every collective on device buffers with 2-4 processes sharing the GPU(s) and
# across two simulated nodes, and conflux-perf on device buffers (latency, busbw to 256 MiB, one-shot vs
# two-shot vs staging, NCCL side by side on one rank: NCCL refuses two ranks on one GPU). Processes
# sharing a GPU run their kernels concurrently only under MPS: the script starts nvidia-cuda-mps-control
# where it exists, after one time-sliced latency run.
#
#   tests/gpu/run-on-gpu.sh [--prebuilt DIR] [--out DIR] [--arch SM]
#     --prebuilt DIR   executables from tests/gpu/bundle.sh (bin/, lib/) instead of building here
#     --out DIR        where the logs go (default: gpu-results)
#     --only "A B"     run only these steps: kernels bench timeout timesliced nccl e2e collectives latency busbw
# Every step has its own time limit; the summary at the end lists each step's exit code.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
prebuilt=""; out="gpu-results"; arch=90; only=
while (($#)); do
  case $1 in
    --prebuilt) prebuilt=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --arch) arch=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    *) sed -n 2,14p "$0"; exit 2 ;;
  esac
done
mkdir -p "$out"
start=$(date +%s)
if [[ -n $prebuilt ]]; then
  bin=$(cd "$prebuilt/bin" && pwd)
  export LD_LIBRARY_PATH="$(cd "$prebuilt/lib" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
else
  build="$root/build-gpu"
  cmake -S "$root" -B "$build" -DCONFLUX_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$arch" -DCMAKE_BUILD_TYPE=Release \
    >"$out/configure.log" 2>&1 || { tail -20 "$out/configure.log"; exit 1; }
  cmake --build "$build" -j "$(nproc)" --target test_cuda_kernels test_device_collectives conflux-cuda-bench \
    conflux-perf nccl-net-conflux >"$out/build.log" 2>&1 || { grep -m5 -A8 error "$out/build.log"; exit 1; }
  mkdir -p "$build/gpu-bin"
  for b in tests/gpu/test_cuda_kernels tests/gpu/test_device_collectives perf/micro/conflux-cuda-bench \
           perf/conflux_perf/conflux-perf; do ln -sf "$build/$b" "$build/gpu-bin/"; done
  bin="$build/gpu-bin"
  echo "built in $(( $(date +%s) - start )) s"
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
export CONFLUX_DEBUG=WARN
summary=()
# step NAME SECONDS COMMAND...: runs with a time limit, output to $out/NAME.log and the console.
step() {
  local name=$1 limit=$2; shift 2
  echo "=== $name: $*"
  local t0=$(date +%s)
  timeout "$limit" "$@" 2>&1 | tee "$out/$name.log" | tail -n 25
  local rc=${PIPESTATUS[0]}
  summary+=("$name rc=$rc ($(( $(date +%s) - t0 )) s)")
}

# Kernel tests: 8 shards in parallel (one GPU is plenty).
kernels() {
  local pids=() rc=0
  for i in $(seq 0 7); do
    GTEST_TOTAL_SHARDS=8 GTEST_SHARD_INDEX=$i "$bin/test_cuda_kernels" --gtest_brief=1 >"$out/kernels-$i.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  cat "$out"/kernels-*.log | grep -E "PASSED|FAILED|SKIPPED|Failure" | sort | uniq -c | head -30
  return $rc
}
wanted() { [[ -z $only || " $only " == *" $1 "* ]]; }
if [[ -z ${CONFLUX_PERF_NCCL_LIB:-} ]]; then
  wheel=$(python3 -c 'import os, nvidia.nccl as n; print(os.path.join(list(n.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)
  [[ -f $wheel ]] && export CONFLUX_PERF_NCCL_LIB=$wheel
fi

wanted kernels && step kernel-tests 75 bash -c "$(declare -f kernels); bin='$bin' out='$out' kernels"
wanted bench && step kernel-bench 30 "$bin/conflux-cuda-bench"
wanted timeout && step device-timeout 30 "$bin/test_device_collectives" --gtest_filter='DeviceFailures.*'
# Processes sharing a GPU without MPS: their kernels are time-sliced.
wanted timesliced && step latency-2ranks-timesliced 30 "$bin/conflux-perf" allreduce --memory cuda --ranks 2 -b 8 -e 64K -f 8 -n 20 -w 5
wanted nccl && step vs-nccl-1rank 45 "$bin/conflux-perf" allreduce --memory cuda --ranks 1 -b 8 -e 256M -f 8 -n 20 -w 3 --compare nccl

mps=0
if command -v nvidia-cuda-mps-control >/dev/null; then
  export CUDA_MPS_PIPE_DIRECTORY="$out/mps-pipe" CUDA_MPS_LOG_DIRECTORY="$out/mps-log"
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  nvidia-cuda-mps-control -d && mps=1
fi
summary+=("MPS: $([[ $mps == 1 ]] && echo running for the steps below || echo not available)")
# NCCL through the net plugin vs NCCL's Socket transport, two processes as two nodes; their kernels must run side by side, hence after MPS (tests/gpu/nccl-e2e.sh).
if [[ -n $prebuilt ]]; then plugin_dir=$(cd "$prebuilt/lib" && pwd); else plugin_dir="$build/plugin"; fi
wanted e2e && step nccl-e2e 240 "$root/tests/gpu/nccl-e2e.sh" --bin "$bin" --lib "$plugin_dir" --out "$out/nccl-e2e" -b 8 -e 64M -f 8
wanted collectives && CONFLUX_TIMEOUT_MS=10000 step device-collectives 150 "$bin/test_device_collectives" --gtest_filter='Ranks/*:Algos/*'
wanted latency && step latency-2ranks 30 "$bin/conflux-perf" allreduce --memory cuda --ranks 2 -b 8 -e 64K -f 2 -n 200 -w 20
if wanted busbw; then
  ar=("$bin/conflux-perf" allreduce --memory cuda)
  step allreduce-2ranks 45 "${ar[@]}" --ranks 2 -b 64K -e 256M -f 4 -n 20 -w 3
  step allreduce-4ranks 45 "${ar[@]}" --ranks 4 -b 8 -e 256M -f 8 -n 20 -w 3
  CONFLUX_CUDA_ONESHOT_BYTES=0 step allreduce-4ranks-twoshot 30 "${ar[@]}" --ranks 4 -b 64K -e 16M -f 4 -n 20 -w 3
  CONFLUX_CUDA_ONESHOT_BYTES=16777216 step allreduce-4ranks-oneshot 30 "${ar[@]}" --ranks 4 -b 64K -e 16M -f 4 -n 20 -w 3
  CONFLUX_CUDA_IPC=0 step allreduce-2ranks-staged 45 "${ar[@]}" --ranks 2 -b 64K -e 256M -f 16 -n 10 -w 2
  for c in allgather reducescatter broadcast alltoall; do
    step $c-4ranks 30 "$bin/conflux-perf" $c --memory cuda --ranks 4 -b 8 -e 256M -f 32 -n 20 -w 3
  done
fi
[[ $mps == 1 ]] && echo quit | nvidia-cuda-mps-control
echo "=== summary ($(( $(date +%s) - start )) s)"
printf '%s\n' "${summary[@]}"
