#!/usr/bin/env python3
"""Before/after performance of two builds of conflux-perf on this machine, the way changes are judged here.

  tools/perf_ab.py --a BUILD_A --b BUILD_B [--reps 21] [--iters 40] [--cells allreduce:2:0,...]
                   [--min 8] [--max 8M] [--json OUT] [--slower-only]

BUILD_A and BUILD_B are build directories (for example a `git worktree` of the old commit, configured with
`cmake --preset ci -DCONFLUX_BUILD_TESTS=OFF` and built with `--target conflux-perf`). Each repetition runs
every cell (collective:ranks:R, where R is conflux-perf's -R, 1 for cfxMemAlloc buffers) once with each
build, in a shuffled cell order and with the builds' order flipped every repetition, pinned (--pin), so
that the phases where this VM's memory bandwidth collapses hit both alike. It prints, per cell, size and
place (in place or not), the median time of each build over the repetitions and their ratio B/A, the
ratio of their lower quartiles, and P(B>A), the share of (A run, B run) pairs in which B was slower (0.5:
no difference). A row is flagged slower when both ratios exceed 1.05: on this VM single runs are often
bimodal (a run lands in a fast or a slow mode, as a whole, e.g. 0.25 or 0.48 us for an 8-byte call), and
when the modes split about evenly the median alone flips between them; the lower quartile reads the
fast mode. Sub-microsecond rows need --iters in the hundreds before their medians settle.
--from-json re-reads a file written by --json instead of measuring.
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile


def perf_binary(build):
    path = os.path.join(build, "perf", "conflux_perf", "conflux-perf")
    if not os.access(path, os.X_OK):
        sys.exit("perf_ab: %s is not built" % path)
    return path


def run_cell(perf, cell, args, json_path, env=None):
    """{(bytes, place): microseconds} of one conflux-perf run (with `env` added to the environment)."""
    coll, ranks, reg = cell
    cmd = [perf, coll, "--ranks", str(ranks), "--pin", "-b", args.min, "-e", args.max, "-f", "4",
           "-n", str(args.iters), "-w", "5", "-R", str(reg), "-J", json_path] + args.perf_arg
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=600,
                       env=dict(os.environ, **(env or {})))
    if p.returncode != 0:
        sys.exit("perf_ab: %s failed (%d):\n%s" % (" ".join(cmd), p.returncode, p.stderr[-2000:]))
    with open(json_path) as f:
        report = json.load(f)
    return {(row["size"], place): row[place]["time"] for row in report["results"]
            for place in ("out_of_place", "in_place")}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", help="build directory of the baseline")
    ap.add_argument("--b", help="build directory of the change")
    ap.add_argument("--reps", type=int, default=21)
    ap.add_argument("--iters", type=int, default=40, help="conflux-perf -n")
    ap.add_argument("--cells", default=",".join("%s:%d:%d" % (c, n, r) for c in ("allreduce", "allgather", "reducescatter")
                                                for n in (2, 4) for r in (0, 1)))
    ap.add_argument("--min", default="8")
    ap.add_argument("--perf-arg", action="append", default=[], metavar="ARG",
                    help="passed to conflux-perf in both builds' runs (repeatable), e.g. --perf-arg=--buffer_offset=16")
    ap.add_argument("--max", default="8M")
    ap.add_argument("--env-a", action="append", default=[], metavar="NAME=VALUE",
                    help="set in A's runs only (repeatable); with the same build as --a and --b, compares settings")
    ap.add_argument("--env-b", action="append", default=[], metavar="NAME=VALUE", help="set in B's runs only")
    ap.add_argument("--json", help="also write every time measured here")
    ap.add_argument("--slower-only", action="store_true", help="print only the rows flagged slower")
    ap.add_argument("--from-json", help="analyse the times a --json run wrote, measuring nothing")
    args = ap.parse_args()
    if args.from_json:
        with open(args.from_json) as f:
            stored = json.load(f)
        times = {}
        for e in stored:
            coll, ranks, reg = e["cell"].split(":")
            times[((coll, int(ranks), int(reg)), e["bytes"], e["place"])] = {"A": e["A"], "B": e["B"]}
        report(times, args)
        return
    if not args.a or not args.b:
        ap.error("--a and --b name the two builds (or --from-json a stored run)")
    builds = {"A": perf_binary(args.a), "B": perf_binary(args.b)}
    envs = {name: dict(item.split("=", 1) for item in items) for name, items in (("A", args.env_a), ("B", args.env_b))}
    cells = []
    for text in args.cells.split(","):
        coll, ranks, reg = text.split(":")
        cells.append((coll, int(ranks), int(reg)))
    times = {}  # (cell, bytes, place) -> {"A": [...], "B": [...]}
    with tempfile.TemporaryDirectory() as tmp:
        json_path = os.path.join(tmp, "run.json")
        for rep in range(args.reps):
            order = cells[:]
            random.Random(rep).shuffle(order)
            for cell in order:
                for name in (("A", "B") if rep % 2 == 0 else ("B", "A")):
                    for (size, place), t in run_cell(builds[name], cell, args, json_path, envs[name]).items():
                        times.setdefault((cell, size, place), {"A": [], "B": []})[name].append(t)
            print("repetition %d/%d done" % (rep + 1, args.reps), file=sys.stderr, flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump([{"cell": "%s:%d:%d" % k[0], "bytes": k[1], "place": k[2], **v} for k, v in times.items()], f)
    report(times, args)


def lower_quartile(values):
    return statistics.quantiles(values, n=4, method="inclusive")[0] if len(values) >= 2 else values[0]


def p_slower(a_times, b_times):
    """The share of (a, b) pairs with b > a, ties counting half."""
    wins = sum((b > a) + 0.5 * (b == a) for a in a_times for b in b_times)
    return wins / (len(a_times) * len(b_times))


def report(times, args):
    ratios, flagged = [], 0
    print("%-14s %5s %3s %9s %-12s %10s %10s %6s %6s %6s" % ("collective", "ranks", "R", "bytes", "place", "A us",
                                                              "B us", "B/A", "q1 B/A", "P(B>A)"))
    for (cell, size, place), v in sorted(times.items()):
        a, b = statistics.median(v["A"]), statistics.median(v["B"])
        q = lower_quartile(v["B"]) / lower_quartile(v["A"])
        slower = b / a > 1.05 and q > 1.05
        ratios.append(b / a)
        flagged += slower
        if args.slower_only and not slower:
            continue
        print("%-14s %5d %3d %9d %-12s %10.2f %10.2f %6.3f %6.3f %6.2f%s" % (
            cell[0], cell[1], cell[2], size, place, a, b, b / a, q, p_slower(v["A"], v["B"]),
            "  slower" if slower else ""))
    print("%d rows, median B/A %.3f, %d flagged slower (median and lower quartile both above 1.05), "
          "%d with median B/A above 1.05, %d below 0.95" % (
              len(ratios), statistics.median(ratios), flagged, sum(r > 1.05 for r in ratios),
              sum(r < 0.95 for r in ratios)))


if __name__ == "__main__":
    main()
