#!/usr/bin/env bash
# Counts short sweeps' slow calls under several settings of one environment variable, interleaved, beside
# Open MPI in the same runs: how the waiting policy (CONFLUX_SPIN_US, CONFLUX_SPIN_COUNT) shows in what a
# user reads from a default-length nccl-tests-style sweep, where one slow call moves a mean of 20.
#
# Each run is
#     conflux-perf <coll> --ranks 2 --compare mpi --pin -b 8 -e 8K -f 4 -n 20 --percentiles
# for all-reduce and all-gather in turn (each size, out of place and in place, then Open MPI the same, so
# every bench starts right after the other library's). With -n 20 a cell's p99 is its slowest call.
# Per setting: the cells (size x place) whose slowest call took more than LIMIT us, Conflux's and Open MPI's,
# and Conflux's mean times summed over a sweep's cells, averaged over the sweeps.
#
#   tools/slow_calls.sh [-B BUILD] [-r RUNS] [-l LIMIT_US] VAR VALUE [VALUE ...]
#   tools/slow_calls.sh -r 100 CONFLUX_SPIN_US 0 20 50 200
set -euo pipefail

build=build/ci
runs=50
limit=10
while getopts "B:r:l:" opt; do
  case "$opt" in
    B) build="$OPTARG" ;;
    r) runs="$OPTARG" ;;
    l) limit="$OPTARG" ;;
    *) sed -n '2,13p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
if [[ $# -lt 2 ]]; then
  sed -n '2,13p' "$0"
  exit 2
fi
var="$1"
shift
perf="$build/perf/conflux_perf/conflux-perf"
[[ -x "$perf" ]] || { echo "slow_calls: no conflux-perf at $perf" >&2; exit 2; }

table=$(mktemp)
trap 'rm -f "$table"' EXIT
for ((i = 1; i <= runs; ++i)); do
  for value in "$@"; do
    for coll in allreduce allgather; do
      # Columns of a --compare mpi --percentiles row: 6 and 10 Conflux's mean times, 21 and 24 its p99s
      # (out of place, in place), 27 and 30 Open MPI's.
      # A failed run (a wrong result, mpirun giving up) is reported and left out, not the end of the sweep.
      { env "$var=$value" "$perf" "$coll" --ranks 2 --compare mpi --pin -b 8 -e 8K -f 4 -n 20 --percentiles 2>&1 ||
          echo "slow_calls: $var=$value $coll run $i failed" >&2; } |
        awk -v v="$value" -v lim="$limit" '!/^#/ && NF >= 30 {
            c += ($21 > lim) + ($24 > lim); m += ($27 > lim) + ($30 > lim); t += $6 + $10; cells += 2 }
          END { print v, c + 0, m + 0, t + 0, cells + 0 }' >> "$table"
    done
  done
done
echo "# $runs runs of all-reduce and all-gather per setting of $var; cells whose slowest call took > $limit us"
printf '%-12s %8s %14s %14s %22s\n' "$var" cells "Conflux slow" "Open MPI slow" "means per sweep (us)"
for value in "$@"; do
  awk -v v="$value" '$1 == v { c += $2; m += $3; t += $4; n++; cells += $5 }
    END { printf "%-12s %8d %14d %14d %22.2f\n", v, cells, c, m, t / n }' "$table"
done
