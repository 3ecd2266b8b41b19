#!/usr/bin/python3
"""conflux-perf --ranks N ends the ranks that can no longer fail by themselves, as mpirun does: with one
rank stopped (SIGSTOP) in the middle of a run, the others fail within CONFLUX_TIMEOUT_MS naming it, and
the launcher then ends the stopped rank at once (not after a fixed grace), says which rank it ended
and why, and exits non-zero well within the timeout plus a margin.

  test_launcher_ends_ranks.py CONFLUX_PERF
"""

import os
import signal
import subprocess
import sys
import time

TIMEOUT_MS = 2000
RANKS = 3


def children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(c) for c in f.read().split()]
    except OSError:
        return []


def main():
    binary = sys.argv[1]
    env = dict(os.environ, CONFLUX_TIMEOUT_MS=str(TIMEOUT_MS))
    # A long run of small all-reduces: the ranks are mid-call when one is stopped.
    job = subprocess.Popen([binary, "allreduce", "--ranks", str(RANKS), "-b", "8", "-e", "8", "-n", "100000000",
                            "-w", "1", "-c", "0"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    try:
        deadline = time.monotonic() + 30
        ranks = []
        while len(ranks) < RANKS and time.monotonic() < deadline:
            ranks = sorted(children(job.pid))  # forked in rank order: ascending pids
            time.sleep(0.05)
        if len(ranks) < RANKS:
            print(f"FAIL: {len(ranks)} of {RANKS} ranks started")
            return 1
        time.sleep(1.0)  # into the timed iterations
        stopped = ranks[-1]
        os.kill(stopped, signal.SIGSTOP)
        t0 = time.monotonic()
        try:
            _, err = job.communicate(timeout=45)
        except subprocess.TimeoutExpired:
            print("FAIL: the job was still running 45 s after a rank was stopped")
            return 1
        elapsed = time.monotonic() - t0
    finally:
        if job.poll() is None:
            for c in children(job.pid):
                os.kill(c, signal.SIGKILL)
            job.kill()
            job.wait()
    failures = []
    if job.returncode == 0:
        failures.append("exit status 0 with a rank stopped")
    limit = TIMEOUT_MS / 1000 + 6
    if elapsed > limit:
        failures.append(f"the job ended {elapsed:.1f} s after the stop, over {limit:.0f} s")
    if f"ended rank {RANKS - 1} (pid {stopped}): stopped" not in err:
        failures.append("no line naming the stopped rank it ended")
    if "ended rank 0" in err or "ended rank 1" in err:
        failures.append("a rank that could fail by itself was ended")
    if failures:
        print("FAIL: " + "; ".join(failures))
        print("stderr:\n" + err[-3000:])
        return 1
    print(f"ok: the job ended {elapsed:.1f} s after rank {RANKS - 1} was stopped (timeout {TIMEOUT_MS} ms): "
          + [l for l in err.splitlines() if "ended rank" in l][0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
