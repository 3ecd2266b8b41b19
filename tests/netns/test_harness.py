#!/usr/bin/env python3
"""Self-tests of netns_cluster.py (ctest label netns; one ctest test per function below).

  test_harness.py [--probe PATH_TO_bootstrap_probe] [NAME ...]     (no NAME: every test)

Exit code 0 when the selected tests pass, 1 on a failure, 77 (ctest SKIP_RETURN_CODE) when namespaces
cannot be created here or every selected test skipped. Each test uses its own random prefix and checks
afterwards that no namespace with that prefix is left.
"""
import argparse
import os
import re
import signal
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import netns_cluster as nc  # noqa: E402

CLI = [sys.executable, nc.SELF]


class Skip(Exception):
    pass


def cli(*args, timeout=120):
    return subprocess.run(CLI + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=timeout)


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def wait_for(pred, seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.05)
    return pred()


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purposes.
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def live_group_members(pgid):
    """Pids of running (not zombie) processes in process group @p pgid. Zombies are ignored: orphans are
    reaped by PID 1, which in some containers never reaps."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/%s/stat" % entry) as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z" and int(fields[2]) == pgid:
                out.append(int(entry))
    return out


# ------------------------------------------------------------------------------------------- tests
def test_ping_two_nodes(prefix, _args):
    with nc.Cluster(nodes=2, prefix=prefix) as c:
        expect(c.ping(0, 1) and c.ping(1, 0), "nodes 0 and 1 cannot ping each other")
        expect(not c.ping(0, 5, timeout=0.5), "a ping to an absent node got a reply")


def test_ping_three_nodes(prefix, _args):
    with nc.Cluster(nodes=3, prefix=prefix) as c:
        for a in range(3):
            for b in range(3):
                if a != b:
                    expect(c.ping(a, b), "node %d cannot ping node %d" % (a, b))


def test_per_rank_rails(prefix, _args):
    with nc.Cluster(nodes=2, ranks_per_node=3, rails="per-rank", prefix=prefix) as c:
        expect(c.rails == 3, "per-rank rails with 3 local ranks made %d rails" % c.rails)
        for k in range(3):
            expect(c.ping(0, 1, rail=k) and c.ping(1, 0, rail=k), "rail %d does not join the nodes" % k)
        res = c.run(["sh", "-c", "ip -o -4 addr show dev $CONFLUX_SOCKET_IFNAME"], timeout=30, capture=True,
                    echo=False)
        expect(res.returncode == 0, "ranks failed: " + res.text())
        for r in res.ranks:
            line = " ".join(res.output(r.rank, "stdout"))
            want = "rail%d" % r.local_rank, "10.200.%d.%d/24" % (r.local_rank, r.node + 1)
            expect(all(w in line for w in want), "rank %d: want %s, got %r" % (r.rank, want, line))


def test_rate_limit_tbf(prefix, _args):
    problem = nc.tc_problem()
    if problem:
        raise Skip(problem)
    with nc.Cluster(nodes=2, prefix=prefix) as c:
        free = c.tcp_rate(0, 1, seconds=0.5)
        c.set_rate("200mbit")
        limited = [c.tcp_rate(0, 1, seconds=1.0) for _ in range(2)]
        rev = c.tcp_rate(1, 0, seconds=1.0)
    print("tcp n0->n1 unlimited %.0f Mbit/s; tbf 200mbit: %s Mbit/s; n1->n0 %.0f Mbit/s" % (
        free / 1e6, ", ".join("%.0f" % (x / 1e6) for x in limited), rev / 1e6))
    best = min(limited, key=lambda x: abs(x - 195e6))
    expect(150e6 <= best <= 230e6, "tbf 200mbit measured %.0f Mbit/s, want 150-230" % (best / 1e6))
    expect(150e6 <= rev <= 230e6, "tbf 200mbit n1->n0 measured %.0f Mbit/s, want 150-230" % (rev / 1e6))


def test_rank_environment(prefix, _args):
    p = cli("run", "--nodes", "2", "--ranks-per-node", "2", "--prefix", prefix, "--timeout", "30",
            "--env", "NETNS_TEST={addr}/{iface}", "--", "sh", "-c", "env | grep -E '^(CONFLUX|NETNS)_' | sort")
    expect(p.returncode == 0, "run failed (%d): %s" % (p.returncode, p.stderr))
    env = {}
    for line in p.stdout.splitlines():
        m = re.fullmatch(r"\[node (\d+) rank (\d+)\] (\w+)=(.*)", line)
        expect(m, "unprefixed output line %r" % line)
        env.setdefault((int(m.group(1)), int(m.group(2))), {})[m.group(3)] = m.group(4)
    expect(sorted(env) == [(0, 0), (0, 1), (1, 2), (1, 3)], "ranks seen: %s" % sorted(env))
    secrets_ = {v["CONFLUX_SECRET"] for v in env.values()}
    addrs = {v["CONFLUX_BOOTSTRAP_ADDR"] for v in env.values()}
    expect(len(secrets_) == 1 and re.fullmatch(r"[0-9a-f]{64}", secrets_.pop()), "secret differs or malformed")
    expect(len(addrs) == 1 and re.fullmatch(r"10\.200\.0\.1:\d+", addrs.pop()), "bootstrap address: %s" % addrs)
    for (node, rank), v in env.items():
        want = {"CONFLUX_HOSTID": "node%d" % node, "CONFLUX_RANK": str(rank), "CONFLUX_NRANKS": "4",
                "CONFLUX_LOCAL_RANK": str(rank % 2), "CONFLUX_LOCAL_SIZE": "2", "CONFLUX_SOCKET_IFNAME": "rail0",
                "NETNS_CLUSTER_NODE": str(node), "NETNS_TEST": "10.200.0.%d/rail0" % (node + 1)}
        for k, w in want.items():
            expect(v.get(k) == w, "rank %d: %s=%r, want %r" % (rank, k, v.get(k), w))


def test_exit_code_propagates(prefix, _args):
    p = cli("run", "--nodes", "2", "--ranks-per-node", "2", "--prefix", prefix, "--timeout", "30", "--",
            "sh", "-c", 'if [ "$CONFLUX_RANK" = 2 ]; then exit 7; fi; sleep 0.5')
    expect(p.returncode == 7, "want exit 7 from rank 2, got %d: %s" % (p.returncode, p.stderr))
    expect("rank 2 failed first" in p.stderr, "no failure summary: " + p.stderr)
    with nc.Cluster(nodes=2, prefix=prefix + "k") as c:  # a rank killed by a signal: 128 + signal
        job = c.start(["sleep", "30"], echo=False)
        time.sleep(0.3)
        job.kill_rank(1, signal.SIGKILL)
        res = job.wait(timeout=30, fail_grace=0.5)
        expect(res.returncode == 128 + signal.SIGKILL and res.first_failure == 1,
               "killed rank 1: rc %d first %s" % (res.returncode, res.first_failure))
    expect(not nc.owned_netns(prefix + "k"), "namespaces left: %s" % nc.owned_netns(prefix + "k"))


def test_timeout_kills_ranks(prefix, _args):
    t0 = time.monotonic()
    p = cli("run", "--nodes", "2", "--prefix", prefix, "--timeout", "2", "--", "sleep", "300")
    took = time.monotonic() - t0
    expect(p.returncode == nc.TIMEOUT_RC, "want 124, got %d: %s" % (p.returncode, p.stderr))
    expect(took < 20, "timeout took %.1f s" % took)
    with nc.Cluster(nodes=2, prefix=prefix + "t") as c:  # the ranks' process groups are gone
        job = c.start(["sh", "-c", "sleep 300 & sleep 300"], echo=False)
        pids = job.pids()
        time.sleep(0.3)
        res = job.wait(timeout=1.0)
        expect(res.returncode == nc.TIMEOUT_RC and res.timed_out, "rc %d" % res.returncode)
        expect(not any(alive(pid) for pid in pids), "a rank survived the timeout")
        for pid in pids:  # no child of a rank (same process group) survived either
            expect(not live_group_members(pid), "process group %d still has members" % pid)
    expect(not nc.owned_netns(prefix + "t"), "namespaces left")


def test_signal_cleans_up(prefix, _args):
    p = subprocess.Popen(CLI + ["run", "--nodes", "2", "--prefix", prefix, "--", "sleep", "300"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        expect(wait_for(lambda: os.path.exists(nc.state_path(prefix)) and len(nc.owned_netns(prefix)) == 3, 20),
               "the cluster did not come up")
        time.sleep(0.3)
        p.send_signal(signal.SIGTERM)
        rc = p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    expect(rc == 128 + signal.SIGTERM, "SIGTERM: want %d, got %d: %s" % (128 + signal.SIGTERM, rc, p.stderr.read()))
    expect(not os.path.exists(nc.state_path(prefix)), "control file left")


def test_cleanup_subcommand(prefix, _args):
    decoy = prefix + "x-n0"  # shares the prefix string but is not ours: must survive
    subprocess.run(["ip", "netns", "add", decoy], check=True)
    try:
        p = subprocess.Popen(CLI + ["up", "--nodes", "2", "--rails", "2", "--prefix", prefix],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        expect(wait_for(lambda: len(nc.owned_netns(prefix)) == 3, 20), "the cluster did not come up")
        p.kill()  # a crash: nothing is cleaned up
        p.wait()
        expect(len(nc.owned_netns(prefix)) == 3, "a crashed run should leave its namespaces")
        out = cli("cleanup", "--prefix", prefix)
        expect(out.returncode == 0, "cleanup failed: " + out.stderr)
        expect(not nc.owned_netns(prefix), "cleanup left %s" % nc.owned_netns(prefix))
        expect(decoy in nc.list_netns(), "cleanup deleted a namespace it did not create")
        expect(not os.path.exists(nc.state_path(prefix)), "control file left")
        # Again, swept by `cleanup --stale`: the control file names a dead owner.
        p = subprocess.Popen(CLI + ["up", "--nodes", "2", "--prefix", prefix],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        expect(wait_for(lambda: os.path.exists(nc.state_path(prefix)) and len(nc.owned_netns(prefix)) == 3, 20),
               "the cluster did not come up")
        time.sleep(0.2)
        expect(cli("cleanup", "--stale").returncode == 0 and len(nc.owned_netns(prefix)) == 3,
               "cleanup --stale removed a live cluster")
        p.kill()
        p.wait()
        out = cli("cleanup", "--stale")
        expect(out.returncode == 0 and not nc.owned_netns(prefix), "cleanup --stale: %s" % out.stdout)
    finally:
        subprocess.run(["ip", "netns", "delete", decoy])


def test_link_down_up(prefix, _args):
    with nc.Cluster(nodes=2, rails=2, prefix=prefix) as c:
        expect(c.ping(0, 1, rail=0) and c.ping(0, 1, rail=1), "no connectivity")
        expect(cli("link-down", "--prefix", prefix, "n1", "0").returncode == 0, "link-down failed")
        expect(not c.ping(0, 1, rail=0, timeout=0.5), "ping over a downed link succeeded")
        expect(c.ping(0, 1, rail=1), "rail 1 went down with rail 0")
        expect(cli("link-up", "--prefix", prefix, "n1", "0").returncode == 0, "link-up failed")
        expect(wait_for(lambda: c.ping(0, 1, rail=0, timeout=0.5), 5), "link-up did not restore rail 0")
        c.link_down(0, end="node")  # every rail of node 0, from its own side
        expect(not c.ping(1, 0, rail=0, timeout=0.5) and not c.ping(1, 0, rail=1, timeout=0.5), "node 0 still up")
        c.link_up(0, end="node")
        expect(wait_for(lambda: c.ping(1, 0, rail=1, timeout=0.5), 5), "link-up did not restore node 0")


def test_iperf3(prefix, _args):
    problem = nc.iperf3_problem() or nc.tc_problem()
    if problem:
        raise Skip(problem)
    p = cli("iperf3", "--from", "n0", "--to", "n1", "--seconds", "2", "--prefix", prefix)
    expect(p.returncode == 0, "iperf3 failed: " + p.stdout + p.stderr)
    q = cli("iperf3", "--from", "n1", "--to", "n0", "--seconds", "2", "--prefix", prefix, "--rate", "500mbit")
    expect(q.returncode == 0, "iperf3 --rate failed: " + q.stdout + q.stderr)
    print(p.stdout.strip())
    print(q.stdout.strip())
    limited = float(re.search(r"([0-9.]+) Gbit/s", q.stdout).group(1))
    expect(0.35 <= limited <= 0.55, "iperf3 over tbf 500mbit measured %.3f Gbit/s" % limited)


def test_bootstrap_probe(prefix, args):
    if not args.probe:
        raise Skip("no --probe binary given")
    for nodes, rpn, rails in ((2, 1, "1"), (2, 2, "per-rank")):
        p = cli("run", "--nodes", str(nodes), "--ranks-per-node", str(rpn), "--rails", rails, "--prefix", prefix,
                "--timeout", "60", "--env", "CONFLUX_TIMEOUT_MS=20000", "--", args.probe)
        expect(p.returncode == 0, "probe failed (%d):\n%s\n%s" % (p.returncode, p.stdout, p.stderr))
        hosts = ",".join("node%d" % (r // rpn) for r in range(nodes * rpn))
        for r in range(nodes * rpn):
            want = "[node %d rank %d] bootstrap_probe: rank %d/%d on node%d via CONFLUX_BOOTSTRAP_ADDR: hosts %s" % (
                r // rpn, r, r, nodes * rpn, r // rpn, hosts)
            expect(want in p.stdout, "missing %r in:\n%s" % (want, p.stdout))
        print(p.stdout.strip())


TESTS = {name[5:]: fn for name, fn in globals().items() if name.startswith("test_")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--probe", help="path of the built bootstrap_probe")
    ap.add_argument("names", nargs="*", help="tests to run: %s" % ", ".join(TESTS))
    args = ap.parse_args()
    unknown = [n for n in args.names if n not in TESTS]
    if unknown:
        ap.error("unknown tests: %s" % ", ".join(unknown))
    problem = nc.capability_problem()
    if problem:
        print("netns: skipped: " + problem)
        return nc.SKIP_RC
    nc.cleanup_stale()  # leftovers of harness runs killed by an earlier ctest timeout
    passed = failed = skipped = 0
    with nc.cleanup_on_signals():
        for name in args.names or list(TESTS):
            prefix = nc.random_prefix()
            t0 = time.monotonic()
            try:
                TESTS[name](prefix, args)
                left = nc.owned_netns(prefix)
                expect(not left, "namespaces left behind: %s" % left)
                print("PASS %s (%.1f s)" % (name, time.monotonic() - t0), flush=True)
                passed += 1
            except Skip as e:
                print("netns: skipped: %s: %s" % (name, e), flush=True)
                skipped += 1
            except Exception as e:  # noqa: BLE001 - report and go on
                print("FAIL %s: %s: %s" % (name, type(e).__name__, e), flush=True)
                failed += 1
            finally:
                for p in (prefix, prefix + "k", prefix + "t"):
                    nc.cleanup(p)
    print("%d passed, %d failed, %d skipped" % (passed, failed, skipped))
    if failed:
        return 1
    return nc.SKIP_RC if skipped and not passed else 0


if __name__ == "__main__":
    sys.exit(main())
