#!/usr/bin/env python3
"""Side-by-side network benchmark across simulated nodes, in one run (docs/netns.md, docs/ofi.md).

  netns_bench.py --build BUILD_DIR [--nodes 2] [--ranks-per-node 1] [--rails 1|per-rank] [--rate 2gbit]
                 [--repeats 5] [--p2p-min 4M] [--p2p-max 64M] [--ar-min 1M] [--ar-max 64M]
                 [--iperf-seconds 3] [--iters 20] [--no-mpi] [--markdown FILE]

One cluster of network namespaces is created; then, --repeats times, in an order that alternates between
repeats:
  - iperf3 from node 0 to node 1 over rail 0, one direction and both directions at once;
  - conflux-ofi-pingpong between node 0 and node 1 (one process each, pinned to cores 0 and 1): the ofi
    transport's one-way bandwidth for each message size from --p2p-min to --p2p-max;
  - conflux-perf all-reduce with Conflux on every rank of the cluster (pinned, rank r on core r % cores);
  - the same conflux-perf binary with --backend mpi under Open MPI's mpirun, tcp between the namespaces
    (netns_mpi.py).
It prints the medians (and the range) per size as Markdown tables: ofi against iperf3, and all-reduce busbw
of Conflux against Open MPI and against the bidirectional iperf3 rate, which bounds a 2-node all-reduce.
Exit 77 with the reason where namespaces cannot be created; Open MPI or iperf3 missing drops their columns.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import netns_cluster as nc  # noqa: E402
import netns_mpi  # noqa: E402


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    t = text.strip().upper()
    return int(t[:-1]) * units[t[-1]] if t and t[-1] in units else int(t)


def human(n):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return "%d %s" % (n >> shift, unit)
    return "%d B" % n


def tool(build, *parts):
    path = os.path.join(build, *parts)
    if not os.access(path, os.X_OK):
        raise SystemExit("netns_bench: %s is not built" % path)
    return path


def skipped(rate=None):
    """True (after printing the reason) when namespaces, or tc for a rate limit, are unavailable here."""
    problem = nc.capability_problem() or (nc.tc_problem() if rate else None)
    if problem:
        print("netns: skipped: " + problem, flush=True)
    return problem is not None


def pin_line(cores):
    return 'exec taskset -c $((CONFLUX_RANK %% %d)) "$@"' % cores


# --------------------------------------------------------------------------------------------- steps
def ofi_p2p(c, pingpong, lo, hi, timeout=300):
    """{bytes: GB/s} of conflux-ofi-pingpong from node 0 to node 1 (one process each, on cores 0 and 1)."""
    port = 20000 + os.getpid() % 20000
    cores = os.cpu_count() or 1
    procs = []
    for rank in (0, 1):
        args = ["taskset", "-c", str(rank % cores), pingpong, "--rank", str(rank), "--addr",
                "%s:%d" % (c.addr(0), port), "--bind", c.addr(rank), "--min", str(lo), "--max", str(hi)]
        procs.append(c.popen(rank, args, stdout=nc.subprocess.PIPE, stderr=nc.subprocess.PIPE, text=True,
                             start_new_session=True))
    out = {}
    try:
        results = [p.communicate(timeout=timeout) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                nc.kill_group(p.pid, nc.signal.SIGKILL)
                p.wait()
    for p, (_o, err) in zip(procs, results):
        if p.returncode != 0:
            raise nc.HarnessError("conflux-ofi-pingpong failed (%d): %s" % (p.returncode, err[-500:]))
    for line in results[0][0].splitlines():
        f = line.split()
        if len(f) == 4 and not line.startswith("#"):
            out[int(f[0])] = float(f[2])
    return out


def perf_rows(path):
    """{bytes: out-of-place busbw GB/s} from a conflux-perf JSON file; wrong results are an error."""
    with open(path) as f:
        report = json.load(f)
    for r in report["results"]:
        for place in ("out_of_place", "in_place"):
            if r[place].get("nwrong"):
                raise nc.HarnessError("%s: %d wrong elements at %d bytes (%s)" % (
                    " ".join(report["backends"]), r[place]["nwrong"], r["size"], place))
    return {int(r["size"]): float(r["out_of_place"]["bus_bw"]) for r in report["results"]}


def perf_args(perf, a, json_path, backend):
    return [perf, "allreduce", "--backend", backend, "-b", str(a.ar_min), "-e", str(a.ar_max), "-f", "2",
            "-n", str(a.iters), "-w", "3", "-J", json_path]


def conflux_allreduce(c, perf, a, json_path):
    cmd = ["sh", "-c", pin_line(os.cpu_count() or 1), "sh"] + perf_args(perf, a, json_path, "conflux")
    result = c.run(cmd, timeout=600, echo=False, capture=True,
                   env={"CONFLUX_OFI_PROVIDER": a.provider, "CONFLUX_TIMEOUT_MS": "60000"})
    if result.returncode != 0:
        raise nc.HarnessError("conflux-perf (conflux) failed (%d):\n%s" % (result.returncode,
                                                                          result.text()[-2000:]))
    return perf_rows(json_path)


def mpi_allreduce(c, perf, a, json_path):
    p = netns_mpi.run_mpi(c, perf_args(perf, a, json_path, "mpi"), timeout=600)
    if p.returncode != 0:
        raise nc.HarnessError("conflux-perf (mpi) failed (%d):\n%s" % (p.returncode, (p.stdout + p.stderr)[-2000:]))
    return perf_rows(json_path)


# ------------------------------------------------------------------------------------------ reporting
def med(values):
    return statistics.median(values) if values else None


def cell(values, digits=2):
    if not values:
        return "–"
    if len(values) == 1:
        return "%.*f" % (digits, values[0])
    return "%.*f (%.*f–%.*f)" % (digits, med(values), digits, min(values), digits, max(values))


def ratio(a, b):
    return "%.2f" % (med(a) / med(b)) if a and b and med(b) else "–"


def report(a, samples, commands):
    lines = ["## Network benchmark across simulated nodes", "",
             "%d nodes x %d rank(s), rails %s%s; %d repetitions, medians (min–max); %s." % (
                 a.nodes, a.ranks_per_node, a.rails, ", rate limit " + a.rate if a.rate else "", a.repeats,
                 time.strftime("%Y-%m-%d")), ""]
    uni, bidir = samples["iperf3"], samples["iperf3_bidir"]
    lines += ["iperf3 node 0 -> node 1: %s GB/s one way, %s GB/s per direction both ways at once." % (
        cell(uni), cell(bidir)), ""]
    lines += ["### ofi transport point to point vs iperf3 (GB/s)", "",
              "| message | ofi | iperf3 | ofi / iperf3 |", "|---|---|---|---|"]
    for size in sorted(samples["ofi"]):
        v = samples["ofi"][size]
        lines.append("| %s | %s | %s | %s |" % (human(size), cell(v), cell(uni), ratio(v, uni)))
    lines += ["", "### all-reduce busbw, out of place (GB/s)", "",
              "| size | Conflux | Open MPI | Conflux / MPI | Conflux / iperf3 both ways |", "|---|---|---|---|---|"]
    for size in sorted(samples["conflux"]):
        v, m = samples["conflux"][size], samples["mpi"].get(size, [])
        lines.append("| %s | %s | %s | %s | %s |" % (human(size), cell(v), cell(m), ratio(v, m), ratio(v, bidir)))
    lines += ["", "Commands:", "", "```"] + commands + ["```", ""]
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", required=True, help="build directory (conflux-perf, conflux-ofi-pingpong)")
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--ranks-per-node", type=int, default=1)
    ap.add_argument("--rails", default="1")
    ap.add_argument("--rate")
    ap.add_argument("--provider", default="tcp;ofi_rxm")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--p2p-min", type=parse_size, default=parse_size("4M"))
    ap.add_argument("--p2p-max", type=parse_size, default=parse_size("64M"))
    ap.add_argument("--ar-min", type=parse_size, default=parse_size("1M"))
    ap.add_argument("--ar-max", type=parse_size, default=parse_size("64M"))
    ap.add_argument("--iperf-seconds", type=float, default=3)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--no-mpi", action="store_true")
    ap.add_argument("--markdown", help="also write the report to this file")
    a = ap.parse_args(argv)

    if skipped(a.rate):
        return nc.SKIP_RC
    perf = tool(a.build, "perf", "conflux_perf", "conflux-perf")
    pingpong = tool(a.build, "transport", "ofi", "conflux-ofi-pingpong")
    use_iperf3 = nc.iperf3_problem() is None
    use_mpi = not a.no_mpi and netns_mpi.mpi_problem() is None
    for what, why in (("iperf3", nc.iperf3_problem()), ("Open MPI", None if a.no_mpi else netns_mpi.mpi_problem())):
        if why:
            print("netns_bench: no %s column: %s" % (what, why), file=sys.stderr)

    samples = {"iperf3": [], "iperf3_bidir": [], "ofi": {}, "conflux": {}, "mpi": {}}

    def add(key, rows):
        for size, value in rows.items():
            samples[key].setdefault(size, []).append(value)

    with nc.cleanup_on_signals(), tempfile.TemporaryDirectory(prefix="netns-bench-") as tmp, \
            nc.Cluster(nodes=a.nodes, ranks_per_node=a.ranks_per_node, rails=a.rails, rate=a.rate) as c:
        print(c.describe(), file=sys.stderr, flush=True)
        steps = [("ofi", lambda: add("ofi", ofi_p2p(c, pingpong, a.p2p_min, a.p2p_max))),
                 ("conflux", lambda: add("conflux", conflux_allreduce(c, perf, a, os.path.join(tmp, "c.json"))))]
        if use_iperf3:
            steps.insert(0, ("iperf3", lambda: (samples["iperf3"].append(c.iperf3(0, 1, a.iperf_seconds) / 8e9),
                                                samples["iperf3_bidir"].append(
                                                    c.iperf3(0, 1, a.iperf_seconds, bidir=True) / 8e9))))
        if use_mpi:
            steps.append(("mpi", lambda: add("mpi", mpi_allreduce(c, perf, a, os.path.join(tmp, "m.json")))))
        for rep in range(a.repeats):
            for name, step in (steps if rep % 2 == 0 else steps[::-1]):
                print("netns_bench: repetition %d/%d: %s" % (rep + 1, a.repeats, name), file=sys.stderr, flush=True)
                step()
        commands = [" ".join(sys.argv), "# all-reduce under Open MPI, as launched:",
                    netns_mpi.describe(c, perf_args(perf, a, "FILE", "mpi"))]
    text = report(a, samples, commands)
    print(text)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(text)
    if not samples["conflux"] or (use_mpi and not samples["mpi"]) or not samples["ofi"]:
        print("netns_bench: a step produced no rows", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
