#!/usr/bin/env python3
"""Conflux launched by a real Slurm (slurm_cluster.py: munged, slurmctld, slurmd on this machine).

  test_slurm.py SCENARIO --perf PATH_TO_conflux-perf --sweep PATH_TO_netns_sweep [--pmix 0/1] [--docs DOCS_DIR]

  srun_perf    srun -n 4 conflux-perf allreduce: exit 0, every size checked ("0 OK"), the Slurm launcher
  srun_pmix    srun --mpi=pmix -n 3 of the correctness sweep (every collective, type and op) on two
               communicators made one after the other in each process: every rank
               passes, and the init log names the launcher the variables imply (Slurm) and the
               rendezvous (PMIx, with --pmix 1: a build with PMIx)
  srun_pmi2    the same under --mpi=pmi2 ("PMI (local ranks from Slurm)", a rendezvous file)
  kill_rank    srun -n 4 of all-reduces in a loop, rank 1 SIGKILLed once all loop: without -K every other
               rank fails naming rank 1 and srun ends; with -K srun ends the step within seconds
  sbatch_docs  the sbatch script of docs/launching.md, as written, with sbatch --wait
  srun_two_nodes    two simulated nodes: srun -N 2 --ntasks-per-node=2 --mpi=pmix of the correctness sweep;
                    every rank passes, the id came through PMIx, the ranks see 2 nodes over libfabric
  sbatch_two_nodes  the two-node sbatch script of docs/launching.md, as written

Exit code 0 on success, 1 on a failure, 77 where Slurm cannot start here (not root, packages missing).
"""
import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import slurm_cluster as sl  # noqa: E402

TIMEOUT_MS = 5000
LOOPING = re.compile(r"rank (\d+)/\d+: looping \(pid (\d+)\)")
FAILED = re.compile(r"rank (\d+)/\d+: call \d+ failed after (\d+) ms: (.*)")


def fail(msg, output=""):
    if output:
        print(output)
    print("FAIL: " + msg)
    return 1


def srun_perf(c, args):
    t = time.monotonic()
    r = c.srun(["-n", "4", args.perf, "allreduce", "-b", "8", "-e", "4M", "-f", "8", "-n", "5", "-w", "1"],
               env={"CONFLUX_DEBUG": "INFO"})
    print(r.stdout)
    print("srun_perf: %.1f s" % (time.monotonic() - t))
    if r.returncode != 0:
        return fail("srun exited %d" % r.returncode)
    if "# Out of bounds values : 0 OK" not in r.stdout:
        return fail("conflux-perf did not report every size correct")
    if "4 ranks (launcher environment)" not in r.stdout:
        return fail("conflux-perf did not run 4 ranks from the launcher's environment")
    if not re.search(r"bootstrap: rank 0/4 from Slurm, store 127\.0\.0\.1:\d+ via file", r.stdout):
        return fail("rank 0 did not say it took Slurm's variables and a rendezvous file")
    return 0


def srun_mpi(c, args, plugin, source):
    t = time.monotonic()
    # Two communicators from the environment, one after the other: PMIx is initialised once per process.
    r = c.srun(["--mpi=" + plugin, "-n", "3", args.sweep, "--inits", "2", "1", "1023"], env={"CONFLUX_DEBUG": "INFO"},
               timeout=200)
    passed = sorted(set(re.findall(r"rank (\d+)/3: every case passed", r.stdout)))
    sources = set(re.findall(r"bootstrap: rank 0/3 from (.*?), store \S+ via (\S+)", r.stdout))
    if len(re.findall(r"bootstrap: rank 0/3 from", r.stdout)) != 2:
        return fail("rank 0 did not make two communicators", r.stdout[-4000:])
    print("\n".join(l for l in r.stdout.splitlines() if "netns_sweep" in l or "bootstrap: rank" in l))
    print("srun_%s: %.1f s, ranks passed %s, launcher %s" % (plugin, time.monotonic() - t, passed, sources))
    if r.returncode != 0 or passed != ["0", "1", "2"]:
        return fail("srun --mpi=%s exited %d, ranks that passed: %s" % (plugin, r.returncode, passed), r.stdout[-4000:])
    if sources != {source}:
        return fail("the init log names launcher and rendezvous %s, expected %r" % (sources, source))
    return 0


def run_loop_and_kill(c, args, extra):
    """srun [extra] -n 4 of an all-reduce loop; SIGKILL rank 1 once every rank loops. Returns (rc, lines,
    seconds from the kill to srun's end)."""
    env = {"CONFLUX_TIMEOUT_MS": str(TIMEOUT_MS)}
    p = c.popen(["srun"] + extra + ["-n", "4", args.sweep, "--loop", "4096", "60"], env=env,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines, pids = [], {}
    ready = threading.Event()

    def pump():
        for line in p.stdout:
            lines.append(line.rstrip("\n"))
            m = LOOPING.search(line)
            if m:
                pids[int(m.group(1))] = int(m.group(2))
                if len(pids) == 4:
                    ready.set()

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        if not ready.wait(60):
            return None, lines, 0.0
        os.kill(pids[1], signal.SIGKILL)  # rank 1: a process of this test's own job
        killed = time.monotonic()
        p.wait(timeout=TIMEOUT_MS / 1000 + 30)
        reader.join(timeout=5)
        return p.returncode, lines, time.monotonic() - killed
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def kill_rank(c, args):
    rc, lines, secs = run_loop_and_kill(c, args, [])
    print("\n".join(lines))
    if rc is None:
        return fail("the ranks did not all start looping")
    failed = {int(m.group(1)): (int(m.group(2)), m.group(3)) for m in (FAILED.search(l) for l in lines) if m}
    print("kill_rank without -K: srun exited %d, %.1f s after the kill; failed ranks %s" % (rc, secs, sorted(failed)))
    if rc == 0:
        return fail("srun exited 0 after a rank was killed")
    if sorted(failed) != [0, 2, 3]:
        return fail("ranks that reported a failed call: %s, expected 0, 2 and 3" % sorted(failed))
    for r, (ms, msg) in sorted(failed.items()):
        print("rank %d: %d ms: %s" % (r, ms, msg))
        if "rank 1" not in msg:
            return fail("rank %d's error does not name rank 1: %s" % (r, msg))
        if ms > TIMEOUT_MS + 1500:
            return fail("rank %d failed after %d ms (timeout %d ms)" % (r, ms, TIMEOUT_MS))
    rc, lines, secs = run_loop_and_kill(c, args, ["-K"])
    print("kill_rank with -K: srun exited %s, %.1f s after the kill" % (rc, secs))
    if rc is None or rc == 0:
        print("\n".join(lines))
        return fail("srun -K exited %s after a rank was killed" % rc)
    if secs > 15:
        return fail("srun -K took %.1f s to end the step" % secs)
    return 0


def doc_script(docs, marker):
    """The bash block after the marker in docs/launching.md."""
    with open(os.path.join(docs, "launching.md")) as f:
        text = f.read()
    m = re.search(r"<!-- tests/slurm/test_slurm.py runs the next block as written%s -->\s*```bash\n(.*?)```" % marker,
                  text, re.S)
    if not m:
        raise RuntimeError("no marked sbatch script%s in docs/launching.md" % marker)
    return m.group(1)


def sbatch_docs(c, args, marker="", ranks=4):
    script = doc_script(args.docs, marker)
    # In the cluster's directory: simulated nodes have a /tmp of their own.
    with tempfile.TemporaryDirectory(prefix="sbatch-", dir=c.dir) as d:
        os.chmod(d, 0o755)
        path, out = os.path.join(d, "job.sh"), os.path.join(d, "job.out")
        with open(path, "w") as f:
            f.write(script)
        # As a user would: conflux-perf on PATH, the script submitted from its directory.
        env = {"PATH": os.path.dirname(os.path.abspath(args.perf)) + os.pathsep + os.environ.get("PATH", "")}
        t = time.monotonic()
        r = c.run(["sbatch", "--wait", "-o", out, path], env=env, cwd=d, timeout=150)
        print(r.stdout)
        text = open(out).read() if os.path.exists(out) else ""
        print(text)
        print("sbatch_docs: %.1f s" % (time.monotonic() - t))
        if r.returncode != 0:
            return fail("sbatch --wait exited %d" % r.returncode)
        if "# Out of bounds values : 0 OK" not in text or "%d ranks (launcher environment)" % ranks not in text:
            return fail("the job's output does not show %d ranks with every size correct" % ranks)
        if marker and not {"node0", "node1"} <= set(re.findall(r"Rank +\d+ Group +\d+ Pid +\d+ on +(\S+)", text)):
            return fail("the job's ranks did not run on both nodes")
    return 0


def srun_two_nodes(c, args):
    t = time.monotonic()
    r = c.srun(["-N", "2", "--ntasks-per-node=2", "--mpi=pmix", args.sweep, "1", "1023"],
               env={"CONFLUX_DEBUG": "INFO", "CONFLUX_DEBUG_SUBSYS": "INIT,BOOTSTRAP"}, timeout=200)
    passed = sorted(set(re.findall(r"rank (\d+)/4: every case passed", r.stdout)))
    print("\n".join(l for l in r.stdout.splitlines() if "netns_sweep" in l or "bootstrap: rank" in l or "node(s)" in l))
    print("srun_two_nodes: %.1f s, ranks passed %s" % (time.monotonic() - t, passed))
    if r.returncode != 0 or passed != ["0", "1", "2", "3"]:
        return fail("srun -N 2 exited %d, ranks that passed: %s" % (r.returncode, passed), r.stdout[-4000:])
    if not re.search(r"bootstrap: rank 0/4 from Slurm, store 10\.200\.0\.1:\d+ via PMIx", r.stdout):
        return fail("rank 0's store was not on node 0's address, or its id did not come through PMIx")
    hosts = set(re.findall(r"^(node\d):\d+:\d+ \[\d\] CONFLUX INFO rank \d: 2 node\(s\), inter-node messages over ofi",
                           r.stdout, re.M))
    if hosts != {"node0", "node1"}:
        return fail("the ranks did not say they span 2 nodes over libfabric from both hosts: %s" % hosts)
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("scenario", choices=["srun_perf", "srun_pmix", "srun_pmi2", "kill_rank", "sbatch_docs",
                                         "srun_two_nodes", "sbatch_two_nodes"])
    ap.add_argument("--perf", required=True)
    ap.add_argument("--sweep", required=True)
    ap.add_argument("--pmix", type=int, default=1, help="1: the build has PMIx (CONFLUX_HAVE_PMIX)")
    ap.add_argument("--ofi", type=int, default=1, help="1: the build has the libfabric transport")
    ap.add_argument("--docs", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs"))
    args = ap.parse_args()
    nodes = 2 if args.scenario.endswith("two_nodes") else 1
    why = sl.problem(nodes)
    if why:
        print("slurm: skipped: " + why)
        return sl.SKIP_RC
    with sl.SlurmCluster(nodes=nodes, cpus=8 if nodes == 1 else 4) as c:
        if args.scenario == "srun_two_nodes":
            if not args.ofi:
                print("slurm: skipped: the build has no libfabric transport")
                return sl.SKIP_RC
            return srun_two_nodes(c, args)
        if args.scenario == "sbatch_two_nodes":
            return sbatch_docs(c, args, marker=" on two nodes", ranks=4)
        if args.scenario == "srun_perf":
            return srun_perf(c, args)
        if args.scenario == "srun_pmix":
            # PMIx carries the unique id when the build has it; else the rendezvous file does.
            return srun_mpi(c, args, "pmix", ("Slurm", "PMIx" if args.pmix else "file"))
        if args.scenario == "srun_pmi2":
            return srun_mpi(c, args, "pmi2", ("PMI (local ranks from Slurm)", "file"))
        if args.scenario == "kill_rank":
            return kill_rank(c, args)
        return sbatch_docs(c, args)


if __name__ == "__main__":
    sys.exit(main())
