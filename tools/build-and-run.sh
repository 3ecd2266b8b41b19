#!/usr/bin/env bash
# One-step set-up for a fresh Debian 12 machine: installs the packages Conflux needs (by name, from
# Debian's archive), configures and builds, then runs either the main job or the whole test suite.
#
#   tools/build-and-run.sh demo   # the all-reduce perf suite on 4 local ranks, Open MPI beside it
#   tools/build-and-run.sh test   # every test: release build (all labels, the PyTorch backend's included:
#                                 # torch from PyPI into .venv/, once) + sanitizer build (unit, multiproc)
#                                 # + the threaded parts under ThreadSanitizer (clang)
#                                 # + the fuzz targets (clang), each run briefly from its seed corpus
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-demo}"

packages=(build-essential cmake ninja-build pkg-config git
          libgtest-dev libgmock-dev libbenchmark-dev
          libfabric-dev libfabric-bin libhwloc-dev hwloc libopenmpi-dev openmpi-bin libpmix-dev
          nlohmann-json3-dev iproute2 iperf3 python3-matplotlib python3-venv python3-dev
          prometheus-cpp-dev libcivetweb-dev)
# The test suite also runs a real Prometheus and node_exporter (started by the test on 127.0.0.1), a real
# Slurm (munged, slurmctld and slurmd started by the tests, never as services: tests/slurm), and builds
# the libFuzzer targets with clang (tests/fuzz).
if [[ $mode == test ]]; then
  packages+=(prometheus prometheus-node-exporter slurmctld slurmd slurm-client munge clang-14 libclang-rt-14-dev)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  [[ $(id -u) -ne 0 ]] && sudo="sudo"
  echo "== installing: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

jobs=$(nproc)
# The CUDA toolkit is not a Debian package here: where nvcc is installed (CUDA_HOME or /usr/local/cuda)
# the kernels are built too; the GPU tests then skip on machines without a GPU.
for d in "${CUDA_HOME:-}" /usr/local/cuda; do
  if [[ -n $d && -x $d/bin/nvcc ]] && ! command -v nvcc >/dev/null; then export PATH="$d/bin:$PATH"; fi
done
torch_args=()
if [[ $mode == test ]]; then
  # PyTorch from PyPI into .venv/ (about 3 GB with its CUDA wheels): once, then reused.
  if ! .venv/bin/python -c "import torch" >/dev/null 2>&1; then
    echo "== installing torch into .venv/ (PyPI)"
    python3 -m venv .venv
    .venv/bin/pip install -q --no-input torch numpy expecttest
  fi
  # grafanalib generates the Grafana dashboard (deploy/grafana); a test checks the committed one.
  if ! .venv/bin/python -c "import grafanalib" >/dev/null 2>&1; then
    .venv/bin/pip install -q --no-input grafanalib
  fi
  # The Kubernetes manifests (deploy/k8s) are validated offline against Kubernetes' schemas and the
  # training operator's API types (tests/k8s).
  if ! .venv/bin/python -c "import kubernetes_validate, kubeflow.training, yaml" >/dev/null 2>&1; then
    .venv/bin/pip install -q --no-input kubernetes-validate kubeflow-training pyyaml
  fi
  torch_args=(-DCONFLUX_TORCH_PYTHON="$PWD/.venv/bin/python")
fi
echo "== configure + build (release)"
cfg=$(cmake --preset ci "${torch_args[@]}" 2>&1) || { echo "$cfg"; exit 1; }
grep -E "^-- Conflux" <<<"$cfg" || true
cmake --build --preset ci -j "$jobs"

case "$mode" in
  demo)
    echo "== conflux-perf: all-reduce over 4 local ranks, Open MPI beside it"
    ./build/ci/perf/conflux_perf/conflux-perf allreduce --ranks 4 -b 8 -e 64M -f 8 --compare mpi
    ;;
  test)
    start=$(date +%s)
    echo "== PyTorch backend: pip install plugin/torch into .venv/ (against build/ci's libconflux)"
    CONFLUX_BUILD_DIR="$PWD/build/ci" .venv/bin/pip install -q --no-input --no-build-isolation ./plugin/torch
    echo "== tests (release build)"
    status=0
    ctest --preset ci || status=1
    echo "== configure + build (address,undefined sanitizers)"
    cmake --preset asan >/dev/null
    cmake --build --preset asan -j "$jobs"
    echo "== unit and multi-process tests under the sanitizers"
    ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --preset asan || status=1
    echo "== the threaded parts under ThreadSanitizer (clang; tools/run-tsan.sh)"
    bash tools/run-tsan.sh || status=1
    echo "== fuzz targets (clang, address,undefined): the regressions, then ${CONFLUX_FUZZ_SECONDS:-20} s each"
    # clang-14 is Debian 12's clang, the one whose libFuzzer runtime is installed above (plain `clang` is
    # only what the preset names where no clang-14 exists).
    fuzz_cc=(); command -v clang++-14 >/dev/null && fuzz_cc=(-DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14)
    cmake --preset fuzz "${fuzz_cc[@]}" >/dev/null
    cmake --build --preset fuzz -j "$jobs"
    tests/fuzz/run_fuzzers.sh build/fuzz "${CONFLUX_FUZZ_SECONDS:-20}" build/fuzz/runs || status=1
    leftovers=$(ls /dev/shm | grep '^conflux-' || true)
    if [[ -n "$leftovers" ]]; then
      echo "FAIL: shared-memory segments left in /dev/shm: $leftovers"
      status=1
    fi
    echo "== done in $(( $(date +%s) - start )) s: $([[ $status -eq 0 ]] && echo PASSED || echo FAILED)"
    exit $status
    ;;
  *)
    echo "usage: $0 demo|test" >&2
    exit 2
    ;;
esac
