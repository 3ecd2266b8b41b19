#!/usr/bin/env python3
"""Every all-reduce algorithm, and the selector's own choice, across simulated nodes in one run.

  netns_algos.py --build BUILD_DIR [--nodes 2] [--ranks-per-node 2] [--rails 1|per-rank] [--rate 2gbit]
                 [--algos ring,rhd,tree,dbtree,hier] [--repeats 3] [--min 8] [--max 256M] [--factor 4]
                 [--iters 20] [--big-iters 3] [--big-from 4M] [--env K=V ...] [--baseline BUILD_DIR]
                 [--baseline-env K=V ...] [--no-selector] [--markdown FILE]

One cluster; --repeats rounds, each running conflux-perf all-reduce (out of place, float, sum; every rank
pinned to core rank % cores) once per forced algorithm (CONFLUX_ALGO=allreduce=NAME) and once with the
selector choosing ("auto", whose choice per size is read from its INFO log), in an order that rotates
between rounds. Sizes below --big-from run --iters timed calls, the others --big-iters. It prints, per
size, the median time of each algorithm (range in brackets), the selector's choice and its time as a
fraction of the best measured algorithm's; the exit code is 0 (the report is the product), 1 when a run
fails or produces wrong results, 77 where namespaces cannot be created.

--baseline BUILD_DIR measures a design change: every forced algorithm also runs with that build's
conflux-perf (for example a `git worktree` of the commit before, built with --target conflux-perf), in the
same rotation, and a second table gives per algorithm and size the median time of the baseline, of
--build, and their ratio. --env K=V (repeatable) adds a variable to every run, e.g. CONFLUX_CHUNK_BYTES;
--baseline-env K=V to the baseline's runs only (after --env), so that the baseline can be the same build
with another setting; --no-selector leaves out the selector's own runs (without --baseline the table then
gives each algorithm's median and the best per size).
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

BASE = " (base)"
CHOICE = re.compile(r"allreduce count=(\d+) float32 sum root=0: (\S+) \((.*)\)$")


def run_perf(c, perf, algo, lo, hi, factor, iters, json_path, explain=False, extra_env=None):
    """{bytes: out-of-place time in us} of one conflux-perf run, and with @p explain the selector's
    {bytes: (algo, why)} from its INFO log (logging costs time: such runs are not timed)."""
    env = {"CONFLUX_OFI_PROVIDER": "tcp;ofi_rxm", "CONFLUX_TIMEOUT_MS": "120000"}
    env.update(extra_env or {})
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
    ap.add_argument("--env", action="append", default=[], metavar="K=V")
    ap.add_argument("--baseline")
    ap.add_argument("--baseline-env", action="append", default=[], metavar="K=V")
    ap.add_argument("--no-selector", action="store_true")
    ap.add_argument("--markdown")
    a = ap.parse_args(argv)
    def env_of(pairs):
        out = {}
        for kv in pairs:
            if "=" not in kv:
                ap.error("--env and --baseline-env take K=V, got %r" % kv)
            k, v = kv.split("=", 1)
            out[k] = v
        return out
    extra_env = env_of(a.env)
    base_env = dict(extra_env, **env_of(a.baseline_env))

    if skipped(a.rate):
        return nc.SKIP_RC
    perf = tool(a.build, "perf", "conflux_perf", "conflux-perf")
    base = tool(a.baseline, "perf", "conflux_perf", "conflux-perf") if a.baseline else None
    names = a.algos.split(",")
    # Runs: (label, binary, algorithm, environment); a baseline run's label ends in BASE.
    runs = [(n, perf, n, extra_env) for n in names] + ([] if a.no_selector else [("auto", perf, "auto", extra_env)])
    if base:
        runs += [(n + BASE, base, n, base_env) for n in names]
    big_lo = a.min
    while big_lo < a.big_from:
        big_lo *= a.factor
    parts = []
    if big_lo // a.factor >= a.min:
        parts.append((a.min, min(a.max, big_lo // a.factor), a.iters))
    if big_lo <= a.max:
        parts.append((big_lo, a.max, a.big_iters))

    times = {run[0]: {} for run in runs}
    choices = {}
    with nc.cleanup_on_signals(), tempfile.TemporaryDirectory(prefix="netns-algos-") as tmp, \
            nc.Cluster(nodes=a.nodes, ranks_per_node=a.ranks_per_node, rails=a.rails, rate=a.rate) as c:
        print(c.describe(), file=sys.stderr, flush=True)
        for rep in range(a.repeats):
            order = runs[rep % len(runs):] + runs[:rep % len(runs)]
            for label, binary, algo, env in order:
                for lo, hi, iters in parts:
                    print("netns_algos: repetition %d/%d: %s %s..%s" % (rep + 1, a.repeats, label, human(lo), human(hi)),
                          file=sys.stderr, flush=True)
                    t, _ = run_perf(c, binary, algo, lo, hi, a.factor, iters, os.path.join(tmp, "r.json"),
                                    extra_env=env)
                    for size, us in t.items():
                        times[label].setdefault(size, []).append(us)
        if not a.no_selector:
            for lo, hi, _ in parts:  # the selector's choices and reasons, once
                choices.update(run_perf(c, perf, "auto", lo, hi, a.factor, 1, os.path.join(tmp, "r.json"), explain=True,
                                        extra_env=extra_env)[1])

    def cell(v):
        if not v:
            return "–"
        m = statistics.median(v)
        return "%.0f" % m if len(v) == 1 else "%.0f (%.0f–%.0f)" % (m, min(v), max(v))

    setting = "%d nodes x %d ranks, rails %s%s%s%s; median time in us over %d repetitions (range); out of place, " \
              "float32 sum; %s." % (a.nodes, a.ranks_per_node, a.rails, ", rate limit " + a.rate if a.rate else "",
                                    "".join(", " + kv for kv in a.env),
                                    "".join(", baseline " + kv for kv in a.baseline_env), a.repeats,
                                    time.strftime("%Y-%m-%d"))
    lines = ["## All-reduce algorithms across simulated nodes", "", setting, ""]
    sizes = sorted(times[names[0]])

    def medians_at(size):
        """{algorithm: median time} at @p size, and the fastest algorithm."""
        meds = {n: statistics.median(times[n][size]) for n in names if times[n].get(size)}
        return meds, min(meds, key=meds.get)

    if a.no_selector and not base:
        lines += ["| size | " + " | ".join(names) + " | best |", "|---" * (len(names) + 2) + "|"]
        for size in sizes:
            lines.append("| %s | %s | %s |" % (human(size), " | ".join(cell(times[n].get(size)) for n in names),
                                               medians_at(size)[1]))
    elif not a.no_selector:
        lines += ["| size | " + " | ".join(names) + " | best | selector | selector / best |",
                  "|---" * (len(names) + 4) + "|"]
        worst = 0.0
        for size in sizes:
            meds, best = medians_at(size)
            auto = statistics.median(times["auto"][size])
            chosen = choices.get(size, ("?", ""))[0]
            ratio = auto / meds[best]
            worst = max(worst, ratio)
            lines.append("| %s | %s | %s | %s | %.2f |" % (human(size), " | ".join(cell(times[n].get(size)) for n in names),
                                                         best, chosen, ratio))
        lines += ["", "Selector time / best algorithm's time, worst size: %.2f." % worst, "", "Selector's reasons:", ""]
        lines += ["- %s: %s" % (human(size), choices[size][1]) for size in sorted(choices)]
    if base:
        lines += ["", "### Against the baseline build", "",
                  "Per algorithm: the --baseline build's median, --build's, and their ratio (change / baseline).", "",
                  "| size | " + " | ".join("%s base | %s | ratio" % (n, n) for n in names) + " |",
                  "|---" * (3 * len(names) + 1) + "|"]
        for size in sizes:
            row = []
            for n in names:
                old, new = times[n + BASE].get(size), times[n].get(size)
                ratio = "%.2f" % (statistics.median(new) / statistics.median(old)) if old and new else "–"
                row += [cell(old), cell(new), ratio]
            lines.append("| %s | %s |" % (human(size), " | ".join(row)))
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
