#!/usr/bin/python3
"""tools/perf_report.sh: its options, and the tables it writes from raw results.

  test_report.py CONFLUX_PERF

  - a dry run (-d) prints the sweeps; with -x "-R 1" also the two-core ceiling (bench_reduce) and the
    256 MiB all-reduce beside it, which does not get -x's arguments; -C 0 leaves both out, -C 1 adds them
    without -R 1; a bad -C, -L or -r is refused, naming the option;
  - -A rebuilds a report from a raw directory: one real 2-rank all-reduce sweep (conflux-perf -J) and,
    for two repetitions, a bench_reduce result (its median aggregate) and a 256 MiB run (the same sweep's
    JSON with known bus bandwidths). The sweep's table holds the run's medians; the ceiling table holds
    each repetition's ceiling, busbw and share (busbw / ceiling) and the median share line.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
REPORT = os.path.join(ROOT, "tools", "perf_report.sh")
failures = []


def fail(context, message):
    failures.append("%s: %s" % (context, message))


def report(*args, env=None):
    return subprocess.run(["bash", REPORT, *args], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, **(env or {})))


def check_dry_runs(perf):
    base = ["-d", "-p", perf, "-r", "1", "-c", "allreduce", "-n", "2", "-L", "0"]
    p = report(*base, "-t", "registered", "-x", "-R 1")
    lines = p.stdout.splitlines()
    if p.returncode != 0:
        fail("dry run -R 1", "exit %d: %s" % (p.returncode, p.stderr.strip()))
    if not any("bench_reduce" in l and "spread/real_time/threads:2" in l for l in lines):
        fail("dry run -R 1", "no bench_reduce ceiling command in:\n" + p.stdout)
    big = [l for l in lines if "-b 256M -e 256M" in l]
    if len(big) != 1 or big[0].count("-R 1") != 1 or "--compare mpi" not in big[0]:
        fail("dry run -R 1", "expected one 256 MiB run with -R 1 once and --compare mpi, got %r" % big)
    sweeps = [l for l in lines if "-b 8 -e 256M" in l]
    if len(sweeps) != 1 or not sweeps[0].endswith("-R 1"):
        fail("dry run -R 1", "the sweep should end with -x's arguments: %r" % sweeps)

    p = report(*base, "-t", "registered", "-x", "-R 1", "-C", "0")
    if p.returncode != 0 or "bench_reduce" in p.stdout or "256M -e 256M" in p.stdout:
        fail("dry run -C 0", "the ceiling runs should be left out (exit %d):\n%s" % (p.returncode, p.stdout))
    p = report(*base, "-C", "1")
    if p.returncode != 0 or "bench_reduce" not in p.stdout:
        fail("dry run -C 1", "the ceiling runs should be there without -R 1 (exit %d):\n%s" % (p.returncode, p.stdout))
    p = report(*base)
    if p.returncode != 0 or "bench_reduce" in p.stdout:
        fail("dry run", "no ceiling runs by default without -R 1 (exit %d):\n%s" % (p.returncode, p.stdout))

    for opt, value in (("-C", "2"), ("-L", "x"), ("-r", "0")):
        p = report(*base, opt, value)
        if p.returncode == 0 or opt not in p.stderr:
            fail("bad %s %s" % (opt, value), "should be refused naming %s (exit %d, stderr %r)" % (opt, p.returncode, p.stderr))


def bench_json(median, mean):
    name = "bound/allreduce2/64MiB/spread/real_time/threads:2"
    return {"context": {}, "benchmarks": [
        {"name": name + "_mean", "aggregate_name": "mean", "busbw_bound_GBps": mean},
        {"name": name + "_median", "aggregate_name": "median", "busbw_bound_GBps": median}]}


def check_aggregation(perf):
    tmp = tempfile.mkdtemp(prefix="cfx-report-test.")
    try:
        raw, out = os.path.join(tmp, "raw"), os.path.join(tmp, "out")
        os.makedirs(raw)
        sweep = os.path.join(raw, "allreduce.2.1.json")
        p = subprocess.run([perf, "allreduce", "--ranks", "2", "-b", "8", "-e", "1K", "-f", "4", "-n", "3", "-w", "1",
                            "-J", sweep], capture_output=True, text=True, timeout=120)
        if p.returncode != 0:
            fail("sweep", "conflux-perf failed (%d): %s" % (p.returncode, p.stderr[-2000:]))
            return
        run = json.load(open(sweep))
        with open(os.path.join(raw, "machine.txt"), "w") as f:
            f.write("cpu=test cpu\ncores=2\nreps=2\nrevision=abc1234\n")
        with open(os.path.join(raw, "ceiling-commands.txt"), "w") as f:
            f.write("bench_reduce --benchmark_filter='spread/real_time/threads:2'\n")
        # Repetition r: a ceiling of 10 * r GB/s; its 256 MiB run reports 8 (out of place) and 12 (in place).
        for rep, ceiling in ((1, 10.0), (2, 20.0)):
            json.dump(bench_json(ceiling, ceiling + 5), open(os.path.join(raw, "ceiling.%d.json" % rep), "w"))
            big = json.loads(json.dumps(run))
            big["results"] = [dict(big["results"][-1], size=256 << 20)]
            big["results"][0]["out_of_place"] = dict(big["results"][0]["out_of_place"], bus_bw=8.0)
            big["results"][0]["in_place"] = dict(big["results"][0]["in_place"], bus_bw=12.0)
            json.dump(big, open(os.path.join(raw, "ceiling-run.%d.json" % rep), "w"))
        p = report("-A", raw, "-o", out, "-c", "allreduce", "-n", "2", "-t", "test")
        md_path = os.path.join(out, "performance-test.md")
        if p.returncode != 0 or not os.path.exists(md_path):
            fail("-A", "exit %d, no report: %s" % (p.returncode, p.stderr[-2000:]))
            return
        md = open(md_path).read()
        if "### allreduce, 2 ranks" not in md or "| 512B |" not in md:
            fail("-A", "the sweep's table is missing:\n" + md)
        want = ["| 1 | 10.0 | 8.00 | 80% | 12.0 | 120% |", "| 2 | 20.0 | 8.00 | 40% | 12.0 | 60% |",
                "Median share: out of place 60%, in place 90% (of 2 runs; lowest 40% and 60%)."]
        for w in want:
            if w not in md:
                fail("-A ceiling", "missing %r in:\n%s" % (w, md[md.find("## Registered"):]))
        if "bench_reduce --benchmark_filter" not in md:
            fail("-A ceiling", "the ceiling's command is not quoted")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    perf = os.path.abspath(sys.argv[1])
    if subprocess.run(["/usr/bin/python3", "-c", "import matplotlib"], capture_output=True).returncode != 0:
        print("SKIP: perf_report.sh needs /usr/bin/python3 with matplotlib (python3-matplotlib)")
        sys.exit(77)
    check_dry_runs(perf)
    check_aggregation(perf)
    for f in failures:
        print("FAIL " + f)
    print("%d failure(s)" % len(failures) if failures else "OK")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
