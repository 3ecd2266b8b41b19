"""Ranks launched by netns_cluster.py: their processes, output and exit codes (Cluster.start returns a Job).

Kept apart from the namespace plumbing in netns_cluster.py; nothing here creates or deletes namespaces.
"""
import os
import signal
import subprocess
import threading
import time

TIMEOUT_RC = 124


def exit_code(rc):
    return 128 - rc if rc is not None and rc < 0 else rc


def kill_group(pid, sig):
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class RankProc:
    """One launched rank: its process (a process-group leader) and its output lines."""

    def __init__(self, rank, node, local_rank, popen):
        self.rank, self.node, self.local_rank, self.popen = rank, node, local_rank, popen
        self.lines = []  # (stream, text) when captured
        self.threads = []
        self.returncode = None
        self.killed = False


class JobResult:
    """How a job ended: returncode (first failing rank's code, 124 on timeout, else 0)."""

    def __init__(self, returncode, ranks, timed_out, first_failure):
        self.returncode = returncode
        self.ranks = ranks
        self.timed_out = timed_out
        self.first_failure = first_failure  # rank number or None

    def output(self, rank, stream=None):
        """Rank @p rank's captured lines (without prefix), of one stream ('stdout'/'stderr') or both."""
        return [t for s, t in self.ranks[rank].lines if stream is None or s == stream]

    def text(self):
        return "\n".join("[node %d rank %d] %s" % (r.node, r.rank, t) for r in self.ranks for _, t in r.lines)


class Job:
    """Ranks running inside a cluster's namespaces; see Cluster.start."""

    def __init__(self, cluster, ranks):
        self.cluster, self.ranks = cluster, ranks
        self.result = None

    def pids(self):
        return [r.popen.pid for r in self.ranks]

    def kill_rank(self, rank, sig=signal.SIGKILL):
        """Sends @p sig to rank @p rank's process group (fault injection)."""
        r = self.ranks[rank]
        if r.popen.poll() is None:
            kill_group(r.popen.pid, sig)

    def kill(self):
        """Kills every rank still running: SIGTERM to its process group, SIGKILL after 2 s."""
        live = [r for r in self.ranks if r.popen.poll() is None]
        for r in live:
            r.killed = True
            kill_group(r.popen.pid, signal.SIGTERM)
        end = time.monotonic() + 2.0
        while time.monotonic() < end and any(r.popen.poll() is None for r in live):
            time.sleep(0.02)
        for r in live:
            if r.popen.poll() is None:
                kill_group(r.popen.pid, signal.SIGKILL)
        for r in live:
            try:
                r.popen.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass

    def wait(self, timeout=300.0, fail_grace=30.0):
        """Waits for every rank. After the first failure the others get @p fail_grace seconds (None: until
        the timeout) before being killed; at @p timeout every rank still running is killed. Returns a
        JobResult whose returncode is the first failing rank's exit code (128+N for signal N), else 124 on
        timeout, else 0."""
        if self.result is not None:
            return self.result
        deadline = time.monotonic() + timeout
        first, fail_at, timed_out = None, None, False
        while True:
            now = time.monotonic()
            running = 0
            for r in self.ranks:
                if r.returncode is None:
                    rc = r.popen.poll()
                    if rc is None:
                        running += 1
                        continue
                    r.returncode = exit_code(rc)
                    if r.returncode != 0 and first is None and not r.killed:
                        first, fail_at = r, now
            if running == 0:
                break
            if now >= deadline:
                timed_out = True
                self.cluster._say("netns: timeout after %.0f s: killing %d running rank(s): %s" % (
                    timeout, running, ", ".join(str(r.rank) for r in self.ranks if r.returncode is None)))
                self.kill()
                break
            if first is not None and fail_grace is not None and now >= fail_at + fail_grace:
                self.cluster._say("netns: rank %d failed (%d) %.0f s ago: killing the others" % (
                    first.rank, first.returncode, fail_grace))
                self.kill()
                break
            time.sleep(0.05)
        for r in self.ranks:
            if r.returncode is None:
                r.returncode = exit_code(r.popen.wait())
            for t in r.threads:
                t.join(timeout=5)
        rc = first.returncode if first is not None else (TIMEOUT_RC if timed_out else 0)
        self.result = JobResult(rc, self.ranks, timed_out, first.rank if first is not None else None)
        if self in self.cluster._jobs:
            self.cluster._jobs.remove(self)
            self.cluster._write_state()
        return self.result


def pump_output(rp, name, stream, sink, capture):
    prefix = "[node %d rank %d] " % (rp.node, rp.rank)
    for raw in iter(stream.readline, b""):
        text = raw.decode(errors="replace").rstrip("\n")
        if capture:
            rp.lines.append((name, text))
        if sink is not None:
            with _print_lock:
                sink.write(prefix + text + "\n")
                sink.flush()
    stream.close()


_print_lock = threading.Lock()
