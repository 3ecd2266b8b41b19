#!/usr/bin/env bash
# Runs the fuzz targets of BUILD (the `fuzz` preset's folder, build/fuzz) for SECONDS each, two at a
# time. Each starts from its seed corpus (tests/fuzz/corpus/NAME, copied: the repository is never
# written) and first replays tests/fuzz/regressions/NAME (the inputs of crashes found and fixed).
# Prints one line per target: executions, executions per second, coverage (edges), features and the
# corpus size at the end. A crashing input is kept as OUT/NAME/crash-*; the run's log is OUT/NAME.log.
#
#   tests/fuzz/run_fuzzers.sh BUILD SECONDS [OUT] [NAME...]      (default OUT: a temporary folder)
#
# Exit 0: no target crashed, leaked or timed out; 1: one did (its log's tail is printed); 2: usage.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-}; seconds=${2:-}
[[ -d $build && $seconds =~ ^[1-9][0-9]*$ ]] || { sed -n 2,10p "$0"; exit 2; }
build=$(cd "$build" && pwd)
out=${3:-$(mktemp -d)}
shift $(( $# < 3 ? $# : 3 ))
names=("$@")
if ((${#names[@]} == 0)); then
  for d in "$here"/corpus/*/; do names+=("$(basename "$d")"); done
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)  # each target runs in its own folder: every path must be absolute

run_one() {
  local name=$1 bin="$build/tests/fuzz/fuzz_$1" work="$out/$1"
  if [[ ! -x $bin ]]; then echo "$name: not built (skipped)"; return 3; fi
  rm -rf "$work"; mkdir -p "$work/corpus"
  cp "$here/corpus/$name"/* "$work/corpus/"
  local inputs=("$work/corpus")
  [[ -d $here/regressions/$name ]] && inputs+=("$here/regressions/$name")
  # -timeout: an input running over 10 s is a hang; -rss_limit_mb: a leak or a runaway allocation.
  (cd "$work" && "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
     -artifact_prefix="$work/" "${inputs[@]}" >"$work.log" 2>&1)
  local rc=$?
  local execs cov ft corp
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work.log" | tail -1)
  read -r cov ft corp < <(grep -E '^#[0-9]+' "$work.log" | tail -1 |
    sed -E 's/.*cov: ([0-9]+).*ft: ([0-9]+).*corp: ([0-9]+).*/\1 \2 \3/')
  if ((rc != 0)); then
    echo "$name: FAILED (exit $rc) after ${execs:-?} executions; input kept in $work/"
    grep -E "ERROR|SUMMARY|==[0-9]+==|abort|Test unit written" "$work.log" | head -8
    return 1
  fi
  printf '%-18s %10s execs %8s/s  cov %6s  ft %6s  corpus %5s\n' "$name" "${execs:-?}" \
    "$(( ${execs:-0} / (seconds > 0 ? seconds : 1) ))" "${cov:-?}" "${ft:-?}" "${corp:-?}"
}

status=0 ran=0
pids=()
collect() {  # the exit status of one run_one: 0 ran clean, 3 not built, else a failure
  local rc=0
  wait "$1" || rc=$?
  if ((rc == 0)); then ran=$((ran + 1)); elif ((rc != 3)); then status=1; fi
}
for name in "${names[@]}"; do
  run_one "$name" > "$out/$name.summary" 2>&1 &
  pids+=($!)
  if ((${#pids[@]} == 2)); then
    collect "${pids[0]}"
    pids=("${pids[1]}")
  fi
done
for p in "${pids[@]}"; do collect "$p"; done
for name in "${names[@]}"; do cat "$out/$name.summary"; done
if ((ran == 0 && status == 0)); then echo "no fuzz target was built in $build"; status=1; fi
exit $status
