#!/usr/bin/env python3
"""Faults across simulated nodes (ctest label netns): a communicator spanning 2 nodes x 2 ranks all-reduces
in a loop (netns_sweep --loop, every result checked) while the test does one of:

  link_down         takes node 1's link down for good (a pulled cable)
  kill_rank         kills a rank of node 1
  link_cut_restore  takes node 1's link down for longer than the timeout, then brings it back
  link_flap         takes node 1's link down for 1 s (a fifth of the timeout), then brings it back
  slow_link         limits every link between the nodes to 8 Mbit/s (tc tbf) for 14 s, so that one call
                    takes longer than the timeout, then lifts the limit
  slow_link_tight   the same with a 1 s timeout, about what one 512 KiB piece takes to cross the link
                    with two ranks sharing it (more while the kernel's queues hold bytes): over tcp, whose
                    bytes count as they move (libfabric's only per chunk). It fails without that counting.
  slow_node_chain   3 nodes x 1 rank in a ring (CONFLUX_ALGO=allreduce=ring), 1 s timeout, only node 2's
                    link slow for 14 s: rank 1 waits for rank 0, which itself only waits for rank 2's bytes
                    on the slow link. Rank 1 sees rank 0's progress only as rank 0 tells it across the
                    nodes (progress notices); without them it times out although nothing is stuck.

link_down, kill_rank and link_cut_restore must turn into an error on every surviving rank that names a
rank, within CONFLUX_TIMEOUT_MS (plus slack); after link_cut_restore every rank must also build a new
communicator once the link is back (from the same environment) and all-reduce correctly with it.
link_flap and the slow links must NOT turn into errors: the loop goes on and every result is right (the
slow links check that some call did take longer than the timeout, or the test would prove nothing).
Nothing may be left behind: no /dev/shm segment of the job, no namespace of the cluster. With the path
of conflux-trace (link_down, kill_rank), every rank's flight recorder writes its dump (CONFLUX_TRACE_DIR)
and conflux-trace must read them all: the call the ranks stopped in, the first error, and for a killed
rank that rank as the first suspect.

  test_faults.py PATH_TO_netns_sweep SCENARIO [PATH_TO_conflux-trace]

Exit code 0 on success, 1 on a failure, 77 where namespaces cannot be created.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import netns_cluster as nc  # noqa: E402

SLACK_MS = 4000
FAILED = re.compile(r"call \d+ failed after (\d+) ms: (.*)")
DONE = re.compile(r"done: (\d+) calls, slowest (\d+) ms")
RECOVERED = re.compile(r"recovered after (\d+) ms")


class Scenario:
    """@p fails: the fault must become an error; @p recovers: then a new communicator must work."""

    def __init__(self, timeout_ms, count, seconds, fails, recovers=False, trace=False, nodes=2, ranks_per_node=2,
                 env=None, slow_nodes=None):
        self.timeout_ms, self.count, self.seconds = timeout_ms, count, seconds
        self.fails, self.recovers, self.trace = fails, recovers, trace
        self.nodes, self.ranks_per_node, self.env, self.slow_nodes = nodes, ranks_per_node, env or {}, slow_nodes


SCENARIOS = {
    "link_down": Scenario(3000, 4 << 20, 60, fails=True, trace=True),
    "kill_rank": Scenario(3000, 4 << 20, 60, fails=True, trace=True),
    "link_cut_restore": Scenario(3000, 1 << 20, 60, fails=True, recovers=True),
    # After a cut of 1 s TCP retransmits about 1.4 s after the cut began (backoff 0.2, 0.4, 0.8 s): well
    # inside the 5 s timeout. (A cut of 1.7 s resumed after about 3.2 s: the next retransmission is at 3.0 s.)
    "link_flap": Scenario(5000, 1 << 20, 8, fails=False),
    # 32 MiB per call at 8 Mbit/s: about 11 s per call, each 512 KiB piece still arriving well inside 5 s.
    "slow_link": Scenario(5000, 8 << 20, 20, fails=False),
    # Two ranks per node share the link: a 512 KiB piece takes about 1 s, more while TCP backs off.
    "slow_link_tight": Scenario(1000, 8 << 20, 20, fails=False),
    # 1 MiB per ring step at 8 Mbit/s: about 1 s for each of rank 2's messages, 14 s per call.
    "slow_node_chain": Scenario(1000, 8 << 20, 20, fails=False, nodes=3, ranks_per_node=1,
                                env={"CONFLUX_ALGO": "allreduce=ring"}, slow_nodes=[2]),
}


def shm_segments():
    try:
        return {f for f in os.listdir("/dev/shm") if f.startswith("conflux-")}
    except OSError:
        return set()


def check_trace(trace_prog, trace_dir, scenario, victim, nranks):
    """Problems with what conflux-trace says of the dumps (an empty list when all is well)."""
    out = subprocess.run([trace_prog, trace_dir], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         timeout=60)
    print(out.stdout, end="")
    if out.returncode != 0:
        return ["conflux-trace exited %d" % out.returncode]
    res = subprocess.run([trace_prog, "--json", trace_dir], stdout=subprocess.PIPE, text=True, timeout=60)
    comms = json.loads(res.stdout)
    if len(comms) != 1:
        return ["conflux-trace found %d communicators, expected 1" % len(comms)]
    c = comms[0]
    bad = []
    expect = [r for r in range(nranks) if not (scenario == "kill_rank" and r == victim)]
    if c["dumped"] != expect:
        bad.append("dumps from ranks %s, expected %s" % (c["dumped"], expect))
    if not c["first_error"]:
        bad.append("conflux-trace reports no error")
    if scenario == "link_down" and "network between nodes 0 1" not in c["network"]:
        bad.append("conflux-trace does not suspect the network: %r" % c["network"])
    if scenario == "kill_rank" and (not c["suspects"] or c["suspects"][0]["rank"] != victim):
        bad.append("conflux-trace suspects %s, expected rank %d first" % (c["suspects"], victim))
    return bad


def main(argv):
    prog, scenario = argv[1], argv[2]
    if scenario not in SCENARIOS:
        print("unknown scenario %r; one of %s" % (scenario, ", ".join(SCENARIOS)))
        return 1
    trace_prog = argv[3] if len(argv) > 3 and SCENARIOS[scenario].trace else None
    problem = nc.capability_problem() or (nc.tc_problem() if scenario.startswith("slow_") else None)
    if problem:
        print("netns: skipped: " + problem)
        return nc.SKIP_RC
    trace_dir = tempfile.mkdtemp(prefix="cfx-faults-trace-") if trace_prog else None
    try:
        return run(prog, scenario, trace_prog, trace_dir)
    finally:
        if trace_dir:
            shutil.rmtree(trace_dir, ignore_errors=True)


def inject(c, job, scenario, sc, victim):
    if scenario == "link_down":
        c.link_down(1)
    elif scenario == "kill_rank":
        job.kill_rank(victim)
    elif scenario == "link_cut_restore":
        c.link_down(1)
        time.sleep(sc.timeout_ms / 1000 + 2)
        c.link_up(1)
    elif scenario == "link_flap":
        c.link_down(1)
        time.sleep(1.0)
        c.link_up(1)
    elif scenario.startswith("slow_"):
        c.set_rate("8mbit", nodes=sc.slow_nodes)
        time.sleep(14)
        c.clear_rate()


def check_rank(r, res, scenario, sc):
    """Problems with how rank @p r ended (an empty list when all is well)."""
    out = res.output(r.rank)
    failed = [m for m in (FAILED.search(t) for t in out) if m]
    if not sc.fails:
        done = [m for m in (DONE.search(t) for t in out) if m]
        if r.returncode != 0 or failed or not done:
            return ["rank %d: exit %s, %s" % (r.rank, r.returncode,
                                              "failed: " + failed[0].group(2) if failed else "did not finish")]
        calls, slowest = int(done[0].group(1)), int(done[0].group(2))
        print("rank %d: %d calls, slowest %d ms" % (r.rank, calls, slowest))
        if scenario.startswith("slow_") and slowest <= sc.timeout_ms:
            return ["rank %d: no call took longer than the timeout (%d ms): the link was not slow enough" % (
                r.rank, slowest)]
        if scenario == "link_flap" and slowest < 800:
            return ["rank %d: no call waited for the cut (slowest %d ms): the cut missed the traffic" % (
                r.rank, slowest)]
        return []
    expected_rc = 0 if sc.recovers else 3
    if r.returncode != expected_rc or not failed:
        return ["rank %d: exit %s, no failed call reported" % (r.rank, r.returncode)]
    ms, msg = int(failed[0].group(1)), failed[0].group(2)
    print("rank %d: %d ms: %s" % (r.rank, ms, msg))
    bad = []
    if not re.search(r"rank \d", msg):
        bad.append("rank %d: the error names no rank: %s" % (r.rank, msg))
    if ms > sc.timeout_ms + SLACK_MS:
        bad.append("rank %d: the call failed after %d ms (CONFLUX_TIMEOUT_MS=%d)" % (r.rank, ms, sc.timeout_ms))
    if sc.recovers:
        rec = [m for m in (RECOVERED.search(t) for t in out) if m]
        if not rec:
            bad.append("rank %d: no working communicator after the link came back" % r.rank)
        else:
            print("rank %d: a new communicator worked %s ms after the failure" % (r.rank, rec[0].group(1)))
    return bad


def run(prog, scenario, trace_prog, trace_dir):
    sc = SCENARIOS[scenario]
    before = shm_segments()
    victim = 3  # node 1, local rank 1
    with nc.Cluster(nodes=sc.nodes, ranks_per_node=sc.ranks_per_node) as c:
        prefix = c.prefix
        env = dict(sc.env, CONFLUX_TIMEOUT_MS=str(sc.timeout_ms))
        if trace_dir:
            env["CONFLUX_TRACE_DIR"] = trace_dir
        args = [prog, "--loop", str(sc.count), str(sc.seconds)] + (["--recover"] if sc.recovers else [])
        job = c.start(args, capture=True, env=env)
        end = time.monotonic() + 60
        while time.monotonic() < end and not all(
                any("looping" in t for _, t in r.lines) for r in job.ranks):
            if any(r.popen.poll() is not None for r in job.ranks):
                break
            time.sleep(0.05)
        time.sleep(0.5)
        fault_at = time.monotonic()
        inject(c, job, scenario, sc, victim)
        res = job.wait(timeout=90, fail_grace=3 * (sc.timeout_ms + SLACK_MS) / 1000)
        elapsed_ms = (time.monotonic() - fault_at) * 1000
    bad = []
    for r in res.ranks:
        if scenario == "kill_rank" and r.rank == victim:
            if r.returncode != 128 + 9:
                bad.append("rank %d: expected to be killed, exit %s" % (r.rank, r.returncode))
            continue
        bad += check_rank(r, res, scenario, sc)
    if sc.fails and not sc.recovers and elapsed_ms > 2 * sc.timeout_ms + SLACK_MS:
        bad.append("ranks took %.0f ms after the fault to end (CONFLUX_TIMEOUT_MS=%d)" % (elapsed_ms, sc.timeout_ms))
    # Tests running in parallel create segments of their own for a few milliseconds during init: a new
    # name must stay for two seconds to count as left behind.
    left = shm_segments() - before
    for _ in range(40):
        if not left:
            break
        time.sleep(0.05)
        left = shm_segments() - before
    if left:
        bad.append("left in /dev/shm: " + ", ".join(sorted(left)))
    ns = subprocess.run(["ip", "netns", "list"], stdout=subprocess.PIPE, text=True).stdout
    if prefix in ns:
        bad.append("namespaces of %s remain" % prefix)
    if trace_prog:
        bad += check_trace(trace_prog, trace_dir, scenario, victim, len(res.ranks))
    print("%s: all ranks ended %.0f ms after the fault began" % (scenario, elapsed_ms))
    for b in bad:
        print("FAIL: " + b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
