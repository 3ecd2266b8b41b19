#!/usr/bin/env bash
# The threaded parts under ThreadSanitizer: builds the `tsan` preset's test targets (clang) and runs its
# test preset: the rendezvous store, metrics, the executor with threads as ranks, the thread-safety
# contract of conflux.h (tests/multiproc/test_threads.cc), split and shrunk communicators driven from
# several threads, the C++ API's asynchronous requests and the NCCL plugins driven from several threads.
# A data race fails the test that hit it (halt_on_error: a forked rank exits with TSan's code 66).
#
#   tools/run-tsan.sh          (after the packages of tools/build-and-run.sh test are installed)
set -euo pipefail
cd "$(dirname "$0")/.."
# clang-14 is Debian 12's clang (plain `clang` is only what the preset names where no clang-14 exists).
cc=(); command -v clang++-14 >/dev/null && cc=(-DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14)
cmake --preset tsan "${cc[@]}" >/dev/null
cmake --build --preset tsan -j "$(nproc)"
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/tests/tsan.supp ${TSAN_OPTIONS:-}"
ctest --preset tsan
