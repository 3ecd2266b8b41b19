#!/usr/bin/env python3
"""The cost model's probe across simulated nodes with rate-limited links (ctest label netns).

  test_cost_probe.py PATH_TO_conflux-perf

The probe (src/cost_probe.cc) measures the network's bandwidth with every rank crossing at once and turns
the slowest rank's rate into a per-NIC figure with the model's share. Each case makes a cluster whose
links tc tbf limits to 1 Gbit/s, creates a communicator (conflux-perf, one tiny all-reduce) with
CONFLUX_COST_SAVE, and checks what rank 0 saved: the NICs per node, and a per-NIC bandwidth between
0.55 and 1.15 times the link's rate (lock-step rounds of 1 MiB read 80-90% of it here). A share applied
the wrong way reads half or twice the link on the shared link (one NIC, two ranks crossing at once) and
twice or half with a link per rank. Nodes of unequal size check that a rank without a counterpart on the
next node neither hangs the probe nor counts as a crossing rank.

Exit code 0 on success, 1 on a failure, 77 where namespaces or tc are unavailable.
"""
import os
import sys
import tempfile

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import netns_cluster as nc  # noqa: E402

RATE = "1gbit"
LINK_GBYTES = nc.parse_rate(RATE) / 8e9
LOW, HIGH = 0.55, 1.15

# (nodes, ranks per node, rails, transport, NICs per node the probe must count)
CASES = [
    (2, 2, "1", "ofi", 1),         # two ranks share one 1 Gbit/s link
    (2, 2, "per-rank", "ofi", 2),  # a link per rank
    (2, 2, "per-rank", "tcp", 2),
    (3, "2,1,2", "1", "ofi", 1),   # unequal nodes: local rank 1 of node 0 has no rank 1 on node 1
]


def saved_parameters(path):
    values = {}
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if "=" in line:
                key, value = line.split("=", 1)
                values[key.strip()] = float(value)
    return values


def check_case(perf, nodes, ranks, rails, transport, nics, tmp):
    name = "%d nodes x %s ranks, rails %s, %s" % (nodes, ranks, rails, transport)
    path = os.path.join(tmp, "costs-%d.txt" % len(os.listdir(tmp)))
    env = {"CONFLUX_NET": transport, "CONFLUX_COST_PROBE": "1", "CONFLUX_COST_SAVE": path,
           "CONFLUX_TIMEOUT_MS": "20000"}
    with nc.Cluster(nodes=nodes, ranks_per_node=ranks, rails=rails, rate=RATE) as c:
        res = c.run([perf, "allreduce", "-b", "8", "-e", "8", "-n", "1", "-w", "0"], timeout=120, fail_grace=20,
                    env=env, capture=True, echo=False)
    if res.returncode != 0:
        print(res.text()[-4000:])
        raise AssertionError("%s: conflux-perf failed with exit code %d" % (name, res.returncode))
    if not os.path.exists(path):
        raise AssertionError("%s: rank 0 saved no parameters (CONFLUX_COST_SAVE)" % name)
    p = saved_parameters(path)
    bw = p.get("inter_gbytes_per_s", 0.0)
    print("%s: inter_gbytes_per_s=%.4f (%.0f%% of the link), nics_per_node=%d, inter_alpha_us=%.1f" % (
        name, bw, 100 * bw / LINK_GBYTES, int(p.get("nics_per_node", 0)), p.get("inter_alpha_us", 0.0)), flush=True)
    if int(p.get("nics_per_node", 0)) != nics:
        raise AssertionError("%s: nics_per_node %s, want %d" % (name, p.get("nics_per_node"), nics))
    if not LOW * LINK_GBYTES <= bw <= HIGH * LINK_GBYTES:
        raise AssertionError("%s: the probe's bandwidth per NIC %.4f GB/s is not within %.2f-%.2f x the link's %.4f"
                             % (name, bw, LOW, HIGH, LINK_GBYTES))


def main(argv):
    perf = argv[1]
    problem = nc.capability_problem() or nc.tc_problem()
    if problem:
        print("netns: skipped: " + problem)
        return nc.SKIP_RC
    try:
        with tempfile.TemporaryDirectory(prefix="conflux-probe-") as tmp:
            for case in CASES:
                check_case(perf, *case, tmp)
    except AssertionError as e:
        print("FAILED: %s" % e)
        return 1
    print("passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
