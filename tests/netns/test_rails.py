#!/usr/bin/env python3
"""Rails across simulated nodes (ctest label netns): which libfabric domains (interfaces) each rank opens.

  test_rails.py PATH_TO_netns_sweep PATH_TO_conflux-perf named|topology

named:    2 nodes x 1 rank, two rails per node, CONFLUX_OFI_DOMAINS=rail0,rail1: every collective is still
          correct (netns_sweep), and a 16 MiB all-reduce moves at least a quarter of its bytes over each
          rail (interface counters in node 0), i.e. messages are striped over both NICs.
topology: 2 nodes x 2 ranks, two rails per node, CONFLUX_TOPO_FILE naming rail0 and rail1 as the NICs'
          domains and no CONFLUX_OFI_DOMAINS: local rank k must open rail<k> alone (its nearest NIC by the
          assignment rule; the INFO line says so), and every collective is correct.

Exit code 0 on success, 1 on a failure, 77 where namespaces cannot be created.
"""
import os
import re
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import netns_cluster as nc  # noqa: E402

FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "topology", "vm-2rails.json")
RAILS_LINE = re.compile(r"rank (\d+): \d+ node\(s\), inter-node messages over ofi provider \S+, rail domains (\S+) \((.*)\)")
BASE_ENV = {"CONFLUX_OFI_PROVIDER": "tcp;ofi_rxm", "CONFLUX_TIMEOUT_MS": "20000"}


def counters(c, node, rail):
    """(tx, rx) bytes of node @p node's interface rail<rail>."""
    out = []
    for what in ("tx_bytes", "rx_bytes"):
        p = c.run_in(node, ["cat", "/sys/class/net/%s/statistics/%s" % (c.iface(rail), what)], check=True)
        out.append(int(p.stdout.strip()))
    return tuple(out)


def run_checked(c, cmd, env, what):
    res = c.run(cmd, timeout=150, fail_grace=20, env=env, capture=True, echo=False)
    if res.returncode != 0:
        print(res.text()[-4000:])
        raise AssertionError("%s failed with exit code %d" % (what, res.returncode))
    return res


def named(sweep, perf):
    env = dict(BASE_ENV, CONFLUX_OFI_DOMAINS="rail0,rail1", CONFLUX_DEBUG="INFO", CONFLUX_DEBUG_SUBSYS="INIT")
    with nc.Cluster(nodes=2, ranks_per_node=1, rails=2) as c:
        res = run_checked(c, [sweep], env, "netns_sweep over two named domains")
        for r in res.ranks:
            lines = [m for m in (RAILS_LINE.search(t) for _, t in r.lines) if m]
            if not lines or lines[0].group(2) != "rail0,rail1" or lines[0].group(3) != "CONFLUX_OFI_DOMAINS":
                raise AssertionError("rank %d did not open rail0,rail1 from CONFLUX_OFI_DOMAINS: %s" % (
                    r.rank, [m.group(0) for m in lines]))
        before = [counters(c, 0, k) for k in (0, 1)]
        size = 16 << 20
        run_checked(c, [perf, "allreduce", "-b", str(size), "-e", str(size), "-n", "4", "-w", "1"],
                    dict(BASE_ENV, CONFLUX_OFI_DOMAINS="rail0,rail1"), "conflux-perf over two rails")
        after = [counters(c, 0, k) for k in (0, 1)]
    # 5 all-reduces of 16 MiB on 2 ranks send 5 x 16 MiB each way in all (half in each phase), plus the check.
    moved = [after[k][0] - before[k][0] for k in (0, 1)]
    print("node 0 sent %d bytes on rail0 and %d on rail1" % tuple(moved))
    for k in (0, 1):
        if moved[k] < 5 * size // 4:
            raise AssertionError("rail%d carried only %d bytes of about %d: not striped" % (k, moved[k], 5 * size))


def topology(sweep):
    env = dict(BASE_ENV, CONFLUX_TOPO_FILE=os.path.abspath(FIXTURE), CONFLUX_DEBUG="INFO",
               CONFLUX_DEBUG_SUBSYS="INIT")
    with nc.Cluster(nodes=2, ranks_per_node=2, rails=2) as c:
        res = run_checked(c, [sweep], env, "netns_sweep with rails from the topology")
    for r in res.ranks:
        lines = [m for m in (RAILS_LINE.search(t) for _, t in r.lines) if m]
        want = "rail%d" % r.local_rank
        if not lines or lines[0].group(2) != want or lines[0].group(3) != "nearest NICs by topology":
            raise AssertionError("rank %d (local rank %d) should open %s by topology: %s" % (
                r.rank, r.local_rank, want, [m.group(0) for m in lines]))
        print("rank %d: %s" % (r.rank, lines[0].group(0)))


def main(argv):
    sweep, perf, scenario = argv[1], argv[2], argv[3]
    problem = nc.capability_problem()
    if problem:
        print("netns: skipped: " + problem)
        return nc.SKIP_RC
    try:
        named(sweep, perf) if scenario == "named" else topology(sweep)
    except AssertionError as e:
        print("FAILED: %s" % e)
        return 1
    print("passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
