#!/usr/bin/env python3
"""Faults across simulated nodes (ctest label netns): a communicator spanning 2 nodes x 2 ranks all-reduces
in a loop (netns_sweep --loop) while the test takes node 1's link down, or kills a rank of node 1. Every
surviving rank must return an error that names a rank, within CONFLUX_TIMEOUT_MS (plus slack), and
nothing may be left behind: no /dev/shm segment of the job, no namespace of the cluster. With the path
of conflux-trace, every rank's flight recorder writes its dump (CONFLUX_TRACE_DIR) and conflux-trace must
read them all: the call the ranks stopped in, the first error, and for a killed rank that rank as the
first suspect.

  test_faults.py PATH_TO_netns_sweep link_down|kill_rank [PATH_TO_conflux-trace]

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

TIMEOUT_MS = 3000
SLACK_MS = 4000
FAILED = re.compile(r"call \d+ failed after (\d+) ms: (.*)")


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
    trace_prog = argv[3] if len(argv) > 3 else None
    problem = nc.capability_problem()
    if problem:
        print("netns: skipped: " + problem)
        return nc.SKIP_RC
    trace_dir = tempfile.mkdtemp(prefix="cfx-faults-trace-") if trace_prog else None
    try:
        return run(prog, scenario, trace_prog, trace_dir)
    finally:
        if trace_dir:
            shutil.rmtree(trace_dir, ignore_errors=True)


def run(prog, scenario, trace_prog, trace_dir):
    before = shm_segments()
    victim = 3  # node 1, local rank 1
    with nc.Cluster(nodes=2, ranks_per_node=2) as c:
        prefix = c.prefix
        env = {"CONFLUX_TIMEOUT_MS": str(TIMEOUT_MS)}
        if trace_dir:
            env["CONFLUX_TRACE_DIR"] = trace_dir
        job = c.start([prog, "--loop", str(4 << 20), "60"], capture=True, env=env)
        end = time.monotonic() + 60
        while time.monotonic() < end and not all(
                any("looping" in t for _, t in r.lines) for r in job.ranks):
            if any(r.popen.poll() is not None for r in job.ranks):
                break
            time.sleep(0.05)
        time.sleep(0.5)
        fault_at = time.monotonic()
        if scenario == "link_down":
            c.link_down(1)
        else:
            job.kill_rank(victim)
        res = job.wait(timeout=60, fail_grace=3 * (TIMEOUT_MS + SLACK_MS) / 1000)
        elapsed_ms = (time.monotonic() - fault_at) * 1000
    bad = []
    for r in res.ranks:
        if scenario == "kill_rank" and r.rank == victim:
            if r.returncode != 128 + 9:
                bad.append("rank %d: expected to be killed, exit %s" % (r.rank, r.returncode))
            continue
        lines = [FAILED.search(t) for t in res.output(r.rank)]
        lines = [m for m in lines if m]
        if r.returncode != 3 or not lines:
            bad.append("rank %d: exit %s, no failed call reported" % (r.rank, r.returncode))
            continue
        ms, msg = int(lines[0].group(1)), lines[0].group(2)
        print("rank %d: %d ms: %s" % (r.rank, ms, msg))
        if not re.search(r"rank \d", msg):
            bad.append("rank %d: the error names no rank: %s" % (r.rank, msg))
    if elapsed_ms > 2 * TIMEOUT_MS + SLACK_MS:
        bad.append("ranks took %.0f ms after the fault to end (CONFLUX_TIMEOUT_MS=%d)" % (elapsed_ms, TIMEOUT_MS))
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
    print("%s: all ranks ended %.0f ms after the fault" % (scenario, elapsed_ms))
    for b in bad:
        print("FAIL: " + b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
