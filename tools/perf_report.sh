#!/usr/bin/env bash
# The standard performance comparison, Conflux vs Open MPI, written up as docs/performance.md.
#
# For each repetition (default 5), each collective (all-reduce, all-gather, reduce-scatter) and each rank
# count (2, 4), in that order, so that slow spells of a noisy machine spread over all configurations:
#     conflux-perf <coll> --ranks N --compare mpi --pin -b 8 -e 256M -f 4 -J <raw>/<coll>.<N>.<rep>.json
# Conflux and MPI run side by side inside each conflux-perf run. Then, per collective, rank count and size,
# the median over the repetitions of Conflux's and MPI's bus bandwidth, out of place and in place, and
# their ratios, go into a markdown table; perf/plot.py draws docs/performance-<coll>.png.
# Then the tail: per repetition, without and with a noisy neighbour (--noise 2),
#     conflux-perf allreduce --ranks 2 --compare mpi --pin -b 8 -e 4K -f 8 -n 10000 -w 200 --percentiles [--noise 2]
# and the medians of p50, p99 and max per call go into a table. Around every run `conflux-perf cores` times
# a cache line's round trip between cores 0 and 1: the bandwidth tables use the runs whose probes stayed
# within 3x of the fastest (the host kept the vCPUs close) where at least 3 did; a run whose probe failed
# counts as close. The tail-latency tables use every run. See docs/performance-method.md.
#
#   tools/perf_report.sh [options]
#     -B DIR     build directory holding conflux-perf (default: build/ci, then build, then every build*/)
#     -p PATH    conflux-perf executable (or set CONFLUX_PERF)
#     -r N       repetitions (default 5)
#     -n LIST    rank counts (default "2 4")
#     -c LIST    collectives (default "allreduce allgather reducescatter")
#     -e SIZE    largest size (default 256M)
#     -o DIR     where performance.md and the plots go (default docs/)
#     -k DIR     keep the raw JSON files in DIR (default: a temporary directory, removed at exit)
#     -A DIR     no runs: rebuild the report from the raw JSON files a previous -k left in DIR
#     -x ARGS    extra arguments for every conflux-perf run (e.g. "-d double", or "-R 1": cfxMemAlloc buffers)
#     -t TAG     write performance-TAG.md and performance-TAG-<coll>.png instead (e.g. -t registered -x "-R 1")
#     -L 0       no tail-latency runs (default: 1 without -t, 0 with it)
#     -C 0|1     the two-core ceiling beside a 256 MiB all-reduce on cfxMemAlloc buffers (default: 1 when -x
#                has "-R 1", else 0). Per repetition, after the sweeps:
#                  bench_reduce --benchmark_filter='spread/real_time/threads:2' --benchmark_repetitions=3
#                  conflux-perf allreduce --ranks 2 --compare mpi --pin -R 1 -b 256M -e 256M -n 10 -w 3
#                one right after the other, so that each run's share of the ceiling is read against the
#                memory speed of that moment (performance-method.md, "The ceiling")
#     -d         dry run: print the commands and exit
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
py=/usr/bin/python3
build=""; perf="${CONFLUX_PERF:-}"; reps=5; ranks="2 4"; colls="allreduce allgather reducescatter"
maxsize=256M; outdir="$root/docs"; keep=""; aggregate_only=""; extra=""; dry=0; tag=""; latency=""; ceiling=""

die() { echo "perf_report.sh: $*" >&2; exit 2; }

while getopts "B:p:r:n:c:e:o:k:A:x:t:L:C:dh" opt; do
  case "$opt" in
    B) build=$OPTARG ;;
    p) perf=$OPTARG ;;
    r) reps=$OPTARG ;;
    n) ranks=$OPTARG ;;
    c) colls=$OPTARG ;;
    e) maxsize=$OPTARG ;;
    o) outdir=$OPTARG ;;
    k) keep=$OPTARG ;;
    A) aggregate_only=$OPTARG ;;
    x) extra=$OPTARG ;;
    t) tag=$OPTARG ;;
    L) latency=$OPTARG ;;
    C) ceiling=$OPTARG ;;
    d) dry=1 ;;
    h) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option (see -h)" ;;
  esac
done
[[ "$reps" =~ ^[1-9][0-9]*$ ]] || die "-r needs a positive number, got '$reps'"
[[ -z "$tag" || "$tag" =~ ^[a-z0-9-]+$ ]] || die "-t needs lower-case letters, digits and dashes, got '$tag'"
if [[ -z "$latency" ]]; then latency=$([[ -z "$tag" ]] && echo 1 || echo 0); fi
[[ "$latency" =~ ^[01]$ ]] || die "-L needs 0 or 1, got '$latency'"
if [[ -z "$ceiling" ]]; then ceiling=$([[ " $extra " == *" -R 1 "* ]] && echo 1 || echo 0); fi
[[ "$ceiling" =~ ^[01]$ ]] || die "-C needs 0 or 1, got '$ceiling'"

[[ -x "$py" ]] || die "$py not found: the aggregation and plots need Debian's python3 (with python3-matplotlib)"

find_perf() {
  local dirs=()
  if [[ -n "$build" ]]; then dirs=("$build"); else dirs=("$root/build/ci" "$root/build" "$root"/build*/); fi
  for d in "${dirs[@]}"; do
    for c in "$d/perf/conflux_perf/conflux-perf" "$d/perf/conflux-perf" "$d/bin/conflux-perf"; do
      if [[ -x "$c" ]]; then echo "$c"; return 0; fi
    done
  done
  command -v conflux-perf 2>/dev/null || true
}

if [[ -z "$aggregate_only" ]]; then
  if [[ -z "$perf" ]]; then perf=$(find_perf); fi
  if [[ -z "$perf" || ! -x "$perf" ]]; then
    die "conflux-perf is not built (looked in ${build:-build/ci, build, build*/} under perf/conflux_perf/, perf/ and bin/, and on PATH).
Build it first, e.g.  cmake --build build/ci --target conflux-perf
or name it with -p PATH or CONFLUX_PERF=PATH."
  fi
  # bench_reduce is built beside conflux-perf (perf/micro/ next to perf/conflux_perf/), or installed beside it.
  bench_reduce=$(realpath -m "$(dirname "$perf")/../micro/bench_reduce")
  [[ -x "$bench_reduce" ]] || bench_reduce=$(realpath -m "$(dirname "$perf")/bench_reduce")
  if [[ $ceiling -eq 1 && ! -x "$bench_reduce" && $dry -eq 0 ]]; then
    die "-C 1 needs bench_reduce beside conflux-perf ($bench_reduce): cmake --build build/ci --target bench_reduce"
  fi
  if ! command -v mpirun >/dev/null 2>&1 && [[ $dry -eq 0 ]]; then
    die "mpirun not found: the comparison needs Open MPI (Debian: openmpi-bin libopenmpi-dev)"
  fi
fi

if [[ -n "$aggregate_only" ]]; then
  raw=$aggregate_only
  [[ -d "$raw" ]] || die "-A $raw: no such directory"
elif [[ -n "$keep" ]]; then
  raw=$keep; mkdir -p "$raw"
else
  raw=$(mktemp -d /tmp/conflux-perf-report.XXXXXX)
  trap 'rm -rf "$raw"' EXIT
fi

# ---- the runs ----
if [[ -z "$aggregate_only" ]]; then
  # One run: conflux-perf ARGS -J <raw>/STEM.REP.json, its output in STEM.REP.txt; the first repetition's
  # command (paths relative to the repository) goes into the commands file LIST.
  run_one() {
    local stem=$1 label=$2 rep=$3 list=$4
    shift 4
    local json="$raw/$stem.$rep.json" out="$raw/$stem.$rep.txt" more=$extra
    [[ $stem == ceiling-run ]] && more=""  # its own fixed command: -x is for the sweeps
    # shellcheck disable=SC2206
    local cmd=("$perf" "$@" -J "$json" $more)
    if [[ $dry -eq 1 ]]; then echo "${cmd[*]}"; return; fi
    echo "[$rep/$reps] $label" >&2
    # The cores' hand-over speed before and after (the host may move the vCPUs: performance-method.md).
    "$perf" cores --samples 3 > "$raw/$stem.$rep.cores.txt" 2>&1 || true
    if ! "${cmd[@]}" > "$out" 2>&1; then
      tail -20 "$out" >&2
      die "run failed: ${cmd[*]} (output in $out; keep it with -k)"
    fi
    [[ -s "$json" ]] || die "run wrote no JSON: ${cmd[*]}"
    "$perf" cores --samples 3 >> "$raw/$stem.$rep.cores.txt" 2>&1 || true
    if [[ $rep -eq 1 ]]; then
      printf '%s\n' "${perf#"$root"/} $* -J $stem.<rep>.json${more:+ $more}" >> "$raw/$list"
    fi
  }
  : > "$raw/commands.txt"
  : > "$raw/latency-commands.txt"
  : > "$raw/ceiling-commands.txt"
  # The ceiling of repetition REP: bench_reduce's fused kernel on both cores, into ceiling.REP.json.
  run_ceiling() {
    local rep=$1
    local cmd=("$bench_reduce" --benchmark_filter='spread/real_time/threads:2' --benchmark_repetitions=3
               --benchmark_report_aggregates_only=true --benchmark_format=json)
    if [[ $dry -eq 1 ]]; then echo "${cmd[*]}"; return; fi
    echo "[$rep/$reps] two-core ceiling" >&2
    "${cmd[@]}" > "$raw/ceiling.$rep.json" 2> "$raw/ceiling.$rep.txt" || die "run failed: ${cmd[*]} (output in $raw/ceiling.$rep.txt)"
    grep -q '"aggregate_name": "median"' "$raw/ceiling.$rep.json" ||
      echo "perf_report.sh: bench_reduce measured no ceiling (its threads:2 run needs 2 CPUs): repetition $rep has no ceiling row" >&2
    if [[ $rep -eq 1 ]]; then
      printf '%s\n' "${bench_reduce#"$root"/} --benchmark_filter='spread/real_time/threads:2' --benchmark_repetitions=3" >> "$raw/ceiling-commands.txt"
    fi
  }
  for rep in $(seq 1 "$reps"); do
    for coll in $colls; do
      for n in $ranks; do
        run_one "$coll.$n" "$coll, $n ranks" "$rep" commands.txt \
          "$coll" --ranks "$n" --compare mpi --pin -b 8 -e "$maxsize" -f 4
      done
    done
    # The tail: p50, p99 and max of small all-reduces, quiet and with two spinning neighbours.
    if [[ $latency -eq 1 ]]; then
      for noise in 0 2; do
        noise_args=(); [[ $noise -gt 0 ]] && noise_args=(--noise "$noise")
        run_one "latency.$noise" "tail latency, noise $noise" "$rep" latency-commands.txt \
          allreduce --ranks 2 --compare mpi --pin -b 8 -e 4K -f 8 -n 10000 -w 200 --percentiles "${noise_args[@]}"
      done
    fi
    if [[ $ceiling -eq 1 ]]; then
      run_ceiling "$rep"
      run_one "ceiling-run" "256 MiB all-reduce beside the ceiling" "$rep" ceiling-commands.txt \
        allreduce --ranks 2 --compare mpi --pin -R 1 -b 256M -e 256M -n 10 -w 3
    fi
  done
  [[ $dry -eq 1 ]] && exit 0
fi

# ---- the machine (kept from the original runs when rebuilding with -A) ----
[[ -n "$aggregate_only" && -s "$raw/machine.txt" ]] || {
  echo "cpu=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)"
  echo "cores=$(nproc --all 2>/dev/null || echo '?')"
  echo "mem=$(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo 2>/dev/null)"
  echo "kernel=$(uname -sr)"
  # shellcheck source=/dev/null
  echo "os=$(. /etc/os-release 2>/dev/null && echo "${PRETTY_NAME:-}")"
  echo "mpi=$( (mpirun --version 2>/dev/null || true) | head -1)"
  echo "revision=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')"
  echo "date=$(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "reps=$reps"
} > "$raw/machine.txt"

# ---- medians, tables, plots ----
mkdir -p "$outdir"
"$py" - "$root" "$raw" "$outdir" "$colls" "$ranks" "$tag" "$extra" <<'PY'
import glob, json, os, statistics, subprocess, sys

root, raw, outdir, colls, ranks = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split(), sys.argv[5].split()
tag, extra = sys.argv[6], sys.argv[7]
stem = "performance" + (f"-{tag}" if tag else "")
sys.path.insert(0, os.path.join(root, "perf"))
import plot  # perf/plot.py: the same lenient reading of conflux-perf's JSON

machine = {}
for line in open(os.path.join(raw, "machine.txt")):
    k, _, v = line.rstrip("\n").partition("=")
    machine[k] = v
commands = []
cmd_file = os.path.join(raw, "commands.txt")
if os.path.exists(cmd_file):
    commands = [l.rstrip("\n") for l in open(cmd_file) if l.strip()]

def fmt_size(b):
    return plot.size_label(b)

def plural(k, word):
    return f"{k} {word}" + ("" if k == 1 else "s")

def num(v):
    if v is None:
        return "–"
    return f"{v:.1f}" if abs(v) >= 10 else f"{v:.2f}" if abs(v) >= 0.1 else f"{v:.3g}"

def med(xs):
    return statistics.median(xs) if xs else None

def commands_block(name):
    """The commands a run recorded in raw/NAME, as a fenced block and a blank line."""
    path = os.path.join(raw, name)
    cmds = ([l.rstrip("\n") for l in open(path) if l.strip()] if os.path.exists(path)
            else ["(commands not recorded: report rebuilt with -A)"])
    return ["```", *cmds, "```", ""]

# `conflux-perf cores` before and after each run: the round trip of a cache line between the ranks' cores.
# Where the host moved the vCPUs apart it rises about fivefold and shared-memory collectives slow down
# with it (performance-method.md): the tables use the runs whose probes all stayed within 3x of the
# fastest seen, when at least 3 did, and say how many others they leave out.
def probes_of(path):
    vals = []
    if os.path.exists(path):
        for line in open(path):
            if line.startswith("# round trip of a cache line: "):
                vals.append(float(line.split(": ", 1)[1].split(" ns")[0]))
    return vals

trips = sorted(v for f in glob.glob(os.path.join(raw, "*.cores.txt")) for v in probes_of(f))
near_limit = 3 * trips[0] if trips else None

def near_runs(files):
    """The runs measured with the cores close together, or all runs when fewer than 3 were."""
    if near_limit is None:
        return files
    near = [f for f in files if (lambda v: not v or max(v) <= near_limit)(probes_of(f[:-len(".json")] + ".cores.txt"))]
    return near if len(near) >= 3 else files

core_lines = []
if trips:
    q = lambda p: trips[min(len(trips) - 1, int(p * len(trips)))]
    core_lines = [f"- Cores 0 and 1, round trip of a cache line (`conflux-perf cores`, before and after each of "
                  f"{plural(len(trips) // 2, 'run')}): median {trips[len(trips) // 2]:.0f} ns, from {trips[0]:.0f} "
                  f"to {trips[-1]:.0f} (10th and 90th percentiles {q(0.1):.0f} and {q(0.9):.0f}). Where the host "
                  "runs the vCPUs apart it rises about fivefold and shared-memory collectives slow down with it "
                  f"(performance-method.md); the tables below use the runs whose probes all stayed at or under "
                  f"{near_limit:.0f} ns (3x the fastest) where at least 3 did."]

sections, plots, medians_written = [], [], {}
for coll in colls:
    runs_for_plot = []
    for n in ranks:
        files = sorted(glob.glob(os.path.join(raw, f"{coll}.{n}.*.json")))
        files = [f for f in files if not os.path.basename(f).startswith("median.")]
        if not files:
            continue
        measured = len(files)
        files = near_runs(files)
        conflux, mpi, ctime, mtime, first, group = {}, {}, {}, {}, None, None
        conflux_ip, mpi_ip = {}, {}
        for f in files:
            for _, run in plot.load_inputs([f]):
                first = first or run
                for row in plot.rows_of(run):
                    s = plot.row_size(row)
                    if group is None:
                        group = plot.row_group(row)  # one (type, op): the first the runs report
                    if not s or plot.row_group(row) != group:
                        continue
                    c = plot.row_value(row, False, False)
                    m = plot.row_value(row, False, True)
                    if c is not None:
                        conflux.setdefault(int(s), []).append(c)
                    if m is not None:
                        mpi.setdefault(int(s), []).append(m)
                    c = plot.row_value(row, True, False)
                    m = plot.row_value(row, True, True)
                    if c is not None:
                        conflux_ip.setdefault(int(s), []).append(c)
                    if m is not None:
                        mpi_ip.setdefault(int(s), []).append(m)
                    t = plot.row_time(row, False, False)
                    if t is not None:
                        ctime.setdefault(int(s), []).append(t)
                    t = plot.row_time(row, False, True)
                    if t is not None:
                        mtime.setdefault(int(s), []).append(t)
        sizes = sorted(set(conflux) | set(mpi))
        rows = []
        for s in sizes:
            row = {"size": s, "busbw_oop": med(conflux.get(s, [])), "runs": len(conflux.get(s, []))}
            if s in mpi:
                row["mpi_busbw_oop"] = med(mpi[s])
            if s in ctime:
                row["time_oop"] = med(ctime[s])
            if s in mtime:
                row["mpi_time_oop"] = med(mtime[s])
            if s in conflux_ip:
                row["busbw_ip"] = med(conflux_ip[s])
            if s in mpi_ip:
                row["mpi_busbw_ip"] = med(mpi_ip[s])
            rows.append(row)
        has_time = bool(ctime)
        summary = {"machine": (first or {}).get("machine") or {"cpu": machine.get("cpu"), "cores": machine.get("cores")},
                   "command": plot.run_command(first or {}), "collective": coll, "ranks": int(n),
                   "backend": "conflux", "compare": "mpi", "runs": len(files), "rows": rows}
        mpath = os.path.join(raw, f"median.{coll}.{n}.json")
        with open(mpath, "w") as f:
            json.dump(summary, f, indent=1)
        runs_for_plot.append(mpath)

        has_ip = bool(conflux_ip)
        lines = [f"### {coll}, {n} ranks", "",
                 f"Median of {plural(len(files), 'run')}"
                 + (f" (of {measured}: those with the cores close together, see Machine)" if len(files) < measured else "")
                 + ": bus bandwidth in GB/s (nccl-tests' busbw), out of place"
                 + (" and in place" if has_ip else "")
                 + (", and time per call out of place in µs." if has_time else "."), "",
                 "| size | Conflux busbw | Open MPI busbw | Conflux / MPI |"
                 + (" in place: Conflux | Open MPI | Conflux / MPI |" if has_ip else "")
                 + (" Conflux µs | Open MPI µs |" if has_time else ""),
                 "|---:|---:|---:|---:|" + ("---:|---:|---:|" if has_ip else "") + ("---:|---:|" if has_time else "")]
        def ratio_of(c, m):
            return f"{c / m:.2f}" if c is not None and m else "–"
        for r in rows:
            c, m = r["busbw_oop"], r.get("mpi_busbw_oop")
            line = f"| {fmt_size(r['size'])} | {num(c)} | {num(m)} | {ratio_of(c, m)} |"
            if has_ip:
                ci, mi = r.get("busbw_ip"), r.get("mpi_busbw_ip")
                line += f" {num(ci)} | {num(mi)} | {ratio_of(ci, mi)} |"
            if has_time:
                line += f" {num(r.get('time_oop'))} | {num(r.get('mpi_time_oop'))} |"
            lines.append(line)
        sections.append("\n".join(lines))
    if runs_for_plot:
        png = os.path.join(outdir, f"{stem}-{coll}.png")
        title = f"{coll}: Conflux (solid) vs Open MPI (dashed), medians per size\n{machine.get('cpu', '')}, {machine.get('cores', '?')} cores"
        rc = subprocess.call(["/usr/bin/python3", os.path.join(root, "perf", "plot.py"), *runs_for_plot, "-o", png,
                              "--title", title])
        if rc == 0:
            plots.append((coll, os.path.basename(png)))
        else:
            print(f"perf_report.sh: no plot for {coll} (plot.py exit {rc})", file=sys.stderr)

# The tail: medians over the repetitions of each percentile, per noise level and size.
latency_lines = []
for noise in ("0", "2"):
    files = sorted(glob.glob(os.path.join(raw, f"latency.{noise}.*.json")))
    if not files:
        continue
    cells = {}  # (size, who, which) -> values
    for f in files:
        for _, run in plot.load_inputs([f]):
            for row in plot.rows_of(run):
                s = plot.row_size(row)
                if not s:
                    continue
                for who, baseline in (("conflux", False), ("mpi", True)):
                    for which in ("p50", "p99", "max"):
                        v = plot.row_percentile(row, False, baseline, which)
                        if v is not None:
                            cells.setdefault((int(s), who, which), []).append(v)
    sizes = sorted({k[0] for k in cells})
    if not latency_lines:
        latency_lines = ["## Tail latency", "",
                         "All-reduce on 2 ranks, out of place, every one of 10,000 calls timed (`--percentiles`: "
                         "per call, the slowest rank's time); medians over the runs of p50, p99 and max, in µs. "
                         "\"With 2 neighbours\" runs two processes spinning on arithmetic beside the ranks "
                         "(`--noise 2`), so the scheduler time-shares the ranks' cores.", ""]
        latency_lines += commands_block("latency-commands.txt")
    latency_lines += [f"### {'quiet' if noise == '0' else 'with ' + noise + ' neighbours'}, {plural(len(files), 'run')}", "",
                      "| size | Conflux p50 | p99 | max | Open MPI p50 | p99 | max |",
                      "|---:|---:|---:|---:|---:|---:|---:|"]
    for s in sizes:
        vals = [num(med(cells.get((s, who, which), []))) for who in ("conflux", "mpi") for which in ("p50", "p99", "max")]
        latency_lines.append(f"| {fmt_size(s)} | " + " | ".join(vals) + " |")
    latency_lines.append("")

# The ceiling: per repetition, bench_reduce's fused kernel on both cores (median of its 3 repetitions),
# then the 256 MiB all-reduce on cfxMemAlloc buffers; each run's share is read against its own moment.
ceiling_lines = []
ceiling_rows = []
for f in sorted(glob.glob(os.path.join(raw, "ceiling.*.json")), key=lambda f: int(f.split(".")[-2])):
    rep = f.split(".")[-2]
    try:
        bench = json.load(open(f))
    except (OSError, ValueError):
        continue
    bound = next((b.get("busbw_bound_GBps") for b in bench.get("benchmarks", []) if b.get("aggregate_name") == "median"), None)
    run = os.path.join(raw, f"ceiling-run.{rep}.json")
    vals = {}
    if os.path.exists(run):
        for _, r in plot.load_inputs([run]):
            for row in plot.rows_of(r):
                vals = {(ip, base): plot.row_value(row, ip, base) for ip in (False, True) for base in (False, True)}
    if bound and vals:
        ceiling_rows.append((rep, bound, vals))
if ceiling_rows:
    def share(v, b):
        return f"{100 * v / b:.0f}%" if v is not None and b else "–"
    ceiling_lines = ["## Registered buffers at 256 MiB: share of the two-core ceiling", "",
                     "Each repetition measured the ceiling (bench_reduce's fused reduce-and-spread kernel on both cores "
                     "at once, median of 3; performance-method.md explains it) and right after it the 256 MiB "
                     "all-reduce on `cfxMemAlloc` buffers, so that each run is read against the memory speed of its "
                     "own moment. Bus bandwidth in GB/s.", ""]
    ceiling_lines += commands_block("ceiling-commands.txt")
    ceiling_lines += ["| run | ceiling | Conflux | share | in place | share | Open MPI | in place |",
                      "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    oop_shares, ip_shares = [], []
    for rep, bound, v in ceiling_rows:
        c, ci, m, mi = v.get((False, False)), v.get((True, False)), v.get((False, True)), v.get((True, True))
        if c is not None:
            oop_shares.append(c / bound)
        if ci is not None:
            ip_shares.append(ci / bound)
        ceiling_lines.append(f"| {rep} | {num(bound)} | {num(c)} | {share(c, bound)} | {num(ci)} | {share(ci, bound)} | {num(m)} | {num(mi)} |")
    pct = lambda xs: f"{100 * med(xs):.0f}%" if xs else "–"
    ceiling_lines += ["", f"Median share: out of place {pct(oop_shares)}, in place {pct(ip_shares)} "
                      f"(of {plural(len(ceiling_rows), 'run')}; lowest {pct([min(oop_shares)]) if oop_shares else '–'} "
                      f"and {pct([min(ip_shares)]) if ip_shares else '–'}).", ""]

if not sections:
    sys.exit(f"perf_report.sh: no JSON results in {raw}")

heading = "# Performance: Conflux vs Open MPI" + (f" ({tag}: conflux-perf {extra})" if tag and extra else f" ({tag})" if tag else "")
md = [heading, "",
      "Written by `tools/perf_report.sh`; how we measure (pinning, medians, noise) is in "
      "[performance-method.md](performance-method.md). Timings on these shared VMs vary up to ±2× from run "
      "to run: compare the two columns of one table (measured side by side), not tables from different days.", "",
      "## Machine", "",
      f"- CPU: {machine.get('cpu', '?')}, {machine.get('cores', '?')} cores",
      f"- Memory: {machine.get('mem', '?')}",
      f"- Kernel: {machine.get('kernel', '?')} ({machine.get('os', '')})",
      f"- MPI: {machine.get('mpi', '?')}",
      f"- Conflux revision: {machine.get('revision', '?')}, measured {machine.get('date', '?')}",
      *core_lines,
      "", "## Commands", "",
      f"Each command below ran {plural(int(machine.get('reps') or 0), 'time')}, alternating over all collectives "
      "and rank counts; the tables give the median per size.", "", "```"]
md += commands or ["(commands not recorded: report rebuilt with -A)"]
md += ["```", ""]
if not tag:
    md += ["The same comparison with buffers from `cfxMemAlloc` (`-R 1`: Conflux's direct algorithms, no staging "
           "copies; MPI gets the same buffers) is in [performance-registered.md](performance-registered.md), "
           "written by `tools/perf_report.sh -t registered -x \"-R 1\" -c \"allreduce allgather\"`.", ""]
md += ["## Results", ""]
for coll, png in plots:
    md += [f"![{coll}]({png})", ""]
md += ["\n\n".join(sections), ""]
md += latency_lines
md += ceiling_lines
with open(os.path.join(outdir, stem + ".md"), "w") as f:
    f.write("\n".join(md))
print(f"perf_report.sh: wrote {os.path.join(outdir, stem + '.md')} and {len(plots)} plot(s)")
PY
