#!/usr/bin/env bash
# One short device check of conflux-perf --memory cuda and the nccl backend, for a machine with a GPU:
# builds conflux-perf with CUDA (sm_90 unless -a says otherwise) in a fresh build directory, then runs
# NCCL alone (every type and op, every collective, one size sweep to 256M), Conflux on device buffers,
# the side-by-side comparison, and Perf.CudaMemory. Every run has its own timeout; the output is the
# runs' text, each followed by "rc=N". NCCL is CONFLUX_PERF_NCCL_LIB, else the nvidia-nccl wheel of
# python3 (nvidia/nccl/lib/libnccl.so.2), else libnccl.so.2 from the loader's search path.
#
#   tools/perf_gpu_check.sh [-B BUILD_DIR] [-a CUDA_ARCH] [-p CONFLUX_PERF] [-o OUT_DIR] [-r RANKS]
#     -p   use this conflux-perf (built with CUDA) instead of building one
#     -r   ranks for the multi-rank runs (default: one per GPU, at least 1). NCCL needs one GPU per rank;
#          Conflux runs more ranks than GPUs (ranks share GPUs, local rank % devices).
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="$root/build-gpu-check"; arch=90; out=""; ranks=""; perf=""
while getopts "B:a:o:r:p:" opt; do
  case $opt in
    B) build=$OPTARG ;; a) arch=$OPTARG ;; o) out=$OPTARG ;; r) ranks=$OPTARG ;; p) perf=$OPTARG ;;
    *) sed -n 2,14p "$0"; exit 2 ;;
  esac
done
out=${out:-$build/out}
mkdir -p "$out"
if [ -z "$perf" ]; then
  cmake -S "$root" -B "$build" -DCONFLUX_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$arch" -DCONFLUX_WITH_MPI=OFF \
        > "$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
  cmake --build "$build" -j"$(nproc)" --target conflux-perf > "$out/build.log" 2>&1 ||
    { grep -B2 -A8 -m5 error "$out/build.log"; exit 1; }
  perf="$build/perf/conflux_perf/conflux-perf"
fi

gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
nvidia-smi -L
ranks=${ranks:-$(( gpus > 0 ? gpus : 1 ))}
if [ -z "${CONFLUX_PERF_NCCL_LIB:-}" ]; then
  wheel=$(python3 -c 'import os, nvidia.nccl as n; print(os.path.join(list(n.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)
  [ -f "$wheel" ] && export CONFLUX_PERF_NCCL_LIB=$wheel
fi
echo "NCCL: ${CONFLUX_PERF_NCCL_LIB:-libnccl.so.2 (search path)}; ranks for multi-rank runs: $ranks"

run() { echo "=== conflux-perf $*"; timeout 60 "$perf" "$@"; echo "rc=$?"; }
cuda=(--memory cuda)
run allreduce --ranks 1 "${cuda[@]}" --backend nccl -d all -o all -b 8 -e 1M -f 32
for c in allgather reducescatter broadcast reduce alltoall sendrecv; do
  run $c --ranks "$ranks" "${cuda[@]}" --backend nccl -b 8 -e 64M -f 64
done
run allreduce --ranks "$ranks" "${cuda[@]}" --backend nccl -b 8 -e 256M -f 4 -J "$out/nccl.json"
run allreduce --ranks "$ranks" "${cuda[@]}" --backend nccl -b 1M -e 1M -m 4 -z 1
run allreduce --ranks 2 "${cuda[@]}" --backend nccl -b 8 -e 8      # fails clearly where 2 ranks share a GPU
run allreduce --ranks 2 "${cuda[@]}" -d all -o all -b 8 -e 1M -f 32
run allreduce --ranks "$ranks" "${cuda[@]}" -b 8 -e 256M -f 4 --compare nccl -J "$out/compare.json"
run allreduce --ranks 2 "${cuda[@]}" -b 8 -e 64M -f 8 --compare nccl
echo "=== Perf.CudaMemory"
timeout 240 python3 "$root/tests/perf/test_cuda_memory.py" "$perf" cuda; echo "rc=$?"
