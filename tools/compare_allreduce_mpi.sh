#!/usr/bin/env bash
# Side-by-side float32-sum all-reduce: Conflux vs Open MPI's MPI_Allreduce, same machine, same run,
# each rank pinned to its own core, alternating runs, medians of RUNS runs per size.
#   tools/compare_allreduce_mpi.sh [BUILD_DIR] [RANKS] [RUNS]
set -euo pipefail
build="${1:-build/ci}"; ranks="${2:-2}"; runs="${3:-5}"
sizes=(-b 8 -e 64M -f 2)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for i in $(seq 1 "$runs"); do
  "$build/perf/conflux-allreduce-demo" --ranks "$ranks" --pin "${sizes[@]}" > "$tmp/conflux.$i"
  mpirun --allow-run-as-root --oversubscribe -np "$ranks" --bind-to core --mca btl self,vader \
    "$build/perf/mpi-allreduce-baseline" "${sizes[@]}" > "$tmp/mpi.$i"
done
/usr/bin/python3 - "$tmp" "$runs" "$ranks" <<'PY'
import sys, statistics, glob
tmp, runs, ranks = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def rows(name):
    out = {}
    for f in glob.glob(f"{tmp}/{name}.*"):
        for line in open(f):
            p = line.split()
            if p and p[0].isdigit():
                out.setdefault(int(p[0]), []).append((float(p[2]), float(p[4])))
    return out
c, m = rows("conflux"), rows("mpi")
print(f"# {ranks} ranks, float32 sum, pinned, median of {runs} alternating runs")
print(f"# {'bytes':>10} {'conflux us':>11} {'mpi us':>9} {'conflux busbw':>14} {'mpi busbw':>10} {'ratio':>6}")
for size in sorted(c):
    ct = statistics.median(t for t, _ in c[size]); cb = statistics.median(b for _, b in c[size])
    mt = statistics.median(t for t, _ in m[size]); mb = statistics.median(b for _, b in m[size])
    print(f"  {size:>10} {ct:>11.2f} {mt:>9.2f} {cb:>14.2f} {mb:>10.2f} {cb / mb if mb else 0:>6.2f}")
PY
