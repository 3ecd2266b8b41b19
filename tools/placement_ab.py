#!/usr/bin/env python3
"""Settings compared per vCPU placement: where the host runs the two vCPUs changes on its own every few
seconds to minutes (docs/performance-method.md, "Runs in two modes"), and a setting may help in one
placement and hurt in the other. This loops for a given time; each round probes the placement
(`conflux-perf cores`), runs the baseline beside Open MPI and every setting once, and probes again. The
report keeps the rounds whose two probes agree, grouped by placement, and gives per size the median of
each setting's time over the baseline's (and Open MPI's over Conflux's).

  tools/placement_ab.py --seconds 1080 --json runs.json        # measure, then report
  tools/placement_ab.py --from-json runs.json                  # report only
Settings: --setting NAME VAR=VALUE[,VAR=VALUE] (repeatable; default: streamed staging, and single-copy
reads for all-gather). The baseline runs the library's defaults: since 2026-12-07 that includes
CONFLUX_SHM_STREAM_STAGING=auto, so compare it with `--setting never CONFLUX_SHM_STREAM_STAGING=0
--setting always CONFLUX_SHM_STREAM_STAGING=1` (the tables of 2026-12-06 had 0 as the baseline).
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import time

SIZES = ["131072", "524288", "2097152", "8388608", "33554432"]
COLLS = ["allgather", "allreduce"]


def probe(perf):
    out = subprocess.run([perf, "cores"], capture_output=True, text=True).stdout
    m = re.search(r"round trip of a cache line: ([\d.]+) ns", out)
    return float(m.group(1)) if m else -1.0


def run(perf, coll, env, mpi):
    e = dict(os.environ)
    e.update(env)
    cmd = [perf, coll, "--ranks", "2", "--pin", "-b", "128K", "-e", "32M", "-f", "4"] + (["--compare", "mpi"] if mpi else [])
    out = subprocess.run(cmd, capture_output=True, text=True, env=e).stdout
    rows = {}
    for line in out.splitlines():
        f = line.split()
        if line.startswith("#") or len(f) < 13:
            continue
        # Conflux's out-of-place and in-place times, then Open MPI's (columns 14 and 17 with --compare).
        rows[f[0]] = [float(f[5]), float(f[9])] + ([float(f[13]), float(f[16])] if mpi and len(f) >= 17 else [])
    return rows


def placement(probes):
    a, b = probes
    for name, lo, hi in (("sibling hyperthreads (~50 ns)", 0, 80), ("close (~120 ns)", 80, 150), ("far apart (>= 400 ns)", 400, 1e9)):
        if lo <= a < hi and lo <= b < hi:
            return name
    return None  # moved during the round


def report(rounds, settings):
    groups = {}
    for r in rounds:
        p = placement(r["probes"])
        if p is not None:
            groups.setdefault(p, []).append(r["runs"])
    for p, runs in sorted(groups.items()):
        print("\n### %s: %d rounds\n" % (p, len(runs)))
        print("| collective | size | place | Conflux µs | " + " | ".join("%s / Conflux" % s for s in settings) + " | Open MPI / Conflux |")
        print("|---|---:|---|---:|" + "---:|" * (len(settings) + 1))
        for coll in COLLS:
            for size in SIZES:
                for place in (0, 1):
                    ok = [x for x in runs if size in x["base:" + coll]]
                    if not ok:
                        continue
                    base = statistics.median(x["base:" + coll][size][place] for x in ok)
                    cells = []
                    for s in settings:
                        ratios = [x[s + ":" + coll][size][place] / x["base:" + coll][size][place]
                                  for x in ok if size in x.get(s + ":" + coll, {})]
                        cells.append("%.2f" % statistics.median(ratios) if ratios else "–")
                    mpi = [x["base:" + coll][size][2 + place] / x["base:" + coll][size][place]
                           for x in ok if len(x["base:" + coll][size]) > 2]
                    print("| %s | %s | %s | %.1f | %s | %s |" % (coll, size, ("out", "in")[place], base, " | ".join(cells),
                                                                "%.2f" % statistics.median(mpi) if mpi else "–"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build/ci")
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--json")
    ap.add_argument("--from-json")
    ap.add_argument("--setting", nargs=2, action="append", metavar=("NAME", "VARS"))
    args = ap.parse_args()
    settings = {"streamed": {"CONFLUX_SHM_STREAM_STAGING": "1"}, "single-copy": {"CONFLUX_SHM_CMA": "always"}}
    if args.setting:
        settings = {name: dict(kv.split("=", 1) for kv in spec.split(",")) for name, spec in args.setting}
    if args.from_json:
        saved = json.load(open(args.from_json))
        report(saved["rounds"], saved["settings"])
        return
    perf = os.path.join(args.build, "perf/conflux_perf/conflux-perf")
    rounds = []
    end = time.time() + args.seconds
    while time.time() < end:
        before = probe(perf)
        runs = {}
        for coll in COLLS:
            runs["base:" + coll] = run(perf, coll, {}, True)
            for name, env in settings.items():
                if name == "single-copy" and coll != "allgather":
                    continue  # single-copy reads never carry reductions
                runs[name + ":" + coll] = run(perf, coll, env, False)
        rounds.append({"probes": [before, probe(perf)], "runs": runs})
        if args.json:
            json.dump({"settings": list(settings), "rounds": rounds}, open(args.json, "w"))
    report(rounds, list(settings))


if __name__ == "__main__":
    main()
