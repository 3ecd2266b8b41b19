#!/usr/bin/env python3
"""Every all-reduce algorithm, and the selector's own choice, across simulated nodes in one run.

  netns_algos.py --build BUILD_DIR [--nodes 2] [--ranks-per-node 2] [--rails 1|per-rank] [--rate 2gbit]
                 [--algos ring,rhd,tree,dbtree,hier] [--repeats 3] [--min 8] [--max 256M] [--factor 4]
                 [--iters 20] [--big-iters 3] [--big-from 4M] [--markdown FILE]

One cluster; --repeats rounds, each running conflux-perf all-reduce (out of place, float, sum; every rank
pinned to core rank % cores) once per forced algorithm (CONFLUX_ALGO=allreduce=NAME) and once with the
selector choosing ("auto", whose choice per size is read from its INFO log), in an order that rotates
between rounds. Sizes below --big-from run --iters timed calls, the others --big-iters. It prints, per
size, the median time of each algorithm (range in brackets), the selector's choice and its time as a
fraction of the best measured algorithm's; the exit code is 0 (the report is the product), 1 when a run
fails or produces wrong results, 77 where namespaces cannot be created.
"""
import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import netns_cluster as nc  # noqa: E402
from netns_bench import human, parse_size, pin_line, skipped, tool  # noqa: E402

CHOICE = re.compile(r"allreduce count=(\d+) float32 sum root=0: (\S+) \((.*)\)$")


def run_perf(c, perf, algo, lo, hi, factor, iters, json_path, explain=False):
    """{bytes: out-of-place time in us} of one conflux-perf run, and with @p explain the selector's
    {bytes: (algo, why)} from its INFO log (logging costs time: such runs are not timed)."""
    env = {"CONFLUX_OFI_PROVIDER": "tcp;ofi_rxm", "CONFLUX_TIMEOUT_MS": "120000"}
    if explain:
        env.update({"CONFLUX_DEBUG": "INFO", "CONFLUX_DEBUG_SUBSYS": "COLL"})
    if algo != "auto":
        env["CONFLUX_ALGO"] = "allreduce=" + algo
    cmd = ["sh", "-c", pin_line(os.cpu_count() or 1), "sh", perf, "allreduce", "-b", str(lo), "-e", str(hi), "-f",
           str(factor), "-n", str(iters), "-w", "2", "-J", json_path]
    res = c.run(cmd, timeout=1800, echo=False, capture=True, env=env)
    if res.returncode != 0:
        raise nc.HarnessError("conflux-perf (%s) failed (%d):\n%s" % (algo, res.returncode, res.text()[-3000:]))
    with open(json_path) as f:
        report = json.load(f)
    times = {}
    for r in report["results"]:
        for place in ("out_of_place", "in_place"):
            if r[place].get("nwrong"):
                raise nc.HarnessError("%s: wrong results at %d bytes" % (algo, r["size"]))
        times[int(r["size"])] = float(r["out_of_place"]["time"])
    choices = {}
    for _, line in res.ranks[0].lines:
        m = CHOICE.search(line)
        if m:
            choices[int(m.group(1)) * 4] = (m.group(2), m.group(3))
    return times, choices


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", required=True)
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--ranks-per-node", type=int, default=2)
    ap.add_argument("--rails", default="1")
    ap.add_argument("--rate")
    ap.add_argument("--algos", default="ring,rhd,tree,dbtree,hier")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--min", type=parse_size, default=8)
    ap.add_argument("--max", type=parse_size, default=parse_size("256M"))
    ap.add_argument("--factor", type=int, default=4)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--big-iters", type=int, default=3)
    ap.add_argument("--big-from", type=parse_size, default=parse_size("4M"))
    ap.add_argument("--markdown")
    a = ap.parse_args(argv)

    if skipped(a.rate):
        return nc.SKIP_RC
    perf = tool(a.build, "perf", "conflux_perf", "conflux-perf")
    algos = a.algos.split(",") + ["auto"]
    big_lo = a.min
    while big_lo < a.big_from:
        big_lo *= a.factor
    parts = []
    if big_lo // a.factor >= a.min:
        parts.append((a.min, min(a.max, big_lo // a.factor), a.iters))
    if big_lo <= a.max:
        parts.append((big_lo, a.max, a.big_iters))

    times = {algo: {} for algo in algos}
    choices = {}
    with nc.cleanup_on_signals(), tempfile.TemporaryDirectory(prefix="netns-algos-") as tmp, \
            nc.Cluster(nodes=a.nodes, ranks_per_node=a.ranks_per_node, rails=a.rails, rate=a.rate) as c:
        print(c.describe(), file=sys.stderr, flush=True)
        for rep in range(a.repeats):
            order = algos[rep % len(algos):] + algos[:rep % len(algos)]
            for algo in order:
                for lo, hi, iters in parts:
                    print("netns_algos: repetition %d/%d: %s %s..%s" % (rep + 1, a.repeats, algo, human(lo), human(hi)),
                          file=sys.stderr, flush=True)
                    t, _ = run_perf(c, perf, algo, lo, hi, a.factor, iters, os.path.join(tmp, "r.json"))
                    for size, us in t.items():
                        times[algo].setdefault(size, []).append(us)
        for lo, hi, _ in parts:  # the selector's choices and reasons, once
            choices.update(run_perf(c, perf, "auto", lo, hi, a.factor, 1, os.path.join(tmp, "r.json"), explain=True)[1])

    def cell(v):
        if not v:
            return "–"
        m = statistics.median(v)
        return "%.0f" % m if len(v) == 1 else "%.0f (%.0f–%.0f)" % (m, min(v), max(v))

    names = a.algos.split(",")
    lines = ["## All-reduce algorithms across simulated nodes", "",
             "%d nodes x %d ranks, rails %s%s; median time in us over %d repetitions (range); out of place, "
             "float32 sum; %s." % (a.nodes, a.ranks_per_node, a.rails, ", rate limit " + a.rate if a.rate else "",
                                    a.repeats, time.strftime("%Y-%m-%d")), "",
             "| size | " + " | ".join(names) + " | best | selector | selector / best |",
             "|---" * (len(names) + 4) + "|"]
    worst = 0.0
    for size in sorted(times["auto"]):
        meds = {n: statistics.median(times[n][size]) for n in names if times[n].get(size)}
        best = min(meds, key=meds.get)
        auto = statistics.median(times["auto"][size])
        chosen = choices.get(size, ("?", ""))[0]
        ratio = auto / meds[best]
        worst = max(worst, ratio)
        lines.append("| %s | %s | %s | %s | %.2f |" % (human(size), " | ".join(cell(times[n].get(size)) for n in names),
                                                     best, chosen, ratio))
    lines += ["", "Selector time / best algorithm's time, worst size: %.2f." % worst, "", "Selector's reasons:", ""]
    lines += ["- %s: %s" % (human(size), choices[size][1]) for size in sorted(choices)]
    lines += ["",
              "Command: `%s`" % " ".join(["tests/netns/netns_algos.py"] + (argv if argv is not None else sys.argv[1:])), ""]
    text = "\n".join(lines)
    print(text)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
