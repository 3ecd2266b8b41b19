#!/usr/bin/env python3
"""What a simulated-cluster run owns, and removing what a run killed hard left behind.

A run names everything it creates from its prefix: the namespaces <prefix>-n<i>, <prefix>-sw and
<prefix>-chk, the control file netns-cluster-<prefix>.json in the temporary folder (its layout, its owner
process and the pids of running ranks), and folders made by owned_tempdir. A harness killed with SIGKILL
(a ctest timeout) cannot clean up; cleanup_stale and remove_stale_tempdirs find its leftovers by an owner
process that no longer exists (pid and start time, so a reused pid is not taken for the owner).
Used by netns_cluster.py, which re-exports these names. Only the Python 3 standard library is used.
"""
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile

PREFIX_RE = re.compile(r"[a-z][a-z0-9]{0,15}")


class HarnessError(Exception):
    """A harness command failed."""


def _cmd(args, check=True, timeout=30):
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise HarnessError("%s failed (%d): %s" % (" ".join(args), p.returncode, p.stderr.strip()))
    return p


def check_prefix(prefix):
    if not PREFIX_RE.fullmatch(prefix or ""):
        raise HarnessError("prefix %r must match %s" % (prefix, PREFIX_RE.pattern))
    return prefix


def list_netns():
    """Names of all named network namespaces."""
    if not shutil.which("ip"):
        return []
    out = _cmd(["ip", "netns", "list"], check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def owned_netns(prefix):
    """Namespaces that this harness would have created with @p prefix (exact name pattern only)."""
    pat = re.compile(re.escape(prefix) + r"-(n\d+|sw|chk)")
    return [n for n in list_netns() if pat.fullmatch(n)]


def state_path(prefix):
    """The control file a cluster writes while it exists: its layout and the pids of running ranks."""
    return os.path.join(tempfile.gettempdir(), "netns-cluster-%s.json" % prefix)


def cleanup(prefix):
    """Deletes the namespaces named <prefix>-n<i>, <prefix>-sw and <prefix>-chk (killing processes left in
    them, by pid) and the control file. Returns the names removed."""
    check_prefix(prefix)
    removed = []
    for ns in owned_netns(prefix):
        for pid in _cmd(["ip", "netns", "pids", ns], check=False).stdout.split():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), signal.SIGKILL)
        if _cmd(["ip", "netns", "delete", ns], check=False).returncode == 0:
            removed.append(ns)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(state_path(prefix))
    return removed


def _start_time(pid):
    """Start time of process @p pid in clock ticks (tells a live owner from a reused pid); None if gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def cleanup_stale():
    """Cleans up every cluster whose control file names an owner process that no longer exists (a harness
    killed with SIGKILL, e.g. by a ctest timeout). Clusters without a control file are left alone."""
    removed = []
    folder = tempfile.gettempdir()
    for name in sorted(os.listdir(folder)):
        m = re.fullmatch(r"netns-cluster-(%s)\.json" % PREFIX_RE.pattern, name)
        if not m:
            continue
        try:
            with open(os.path.join(folder, name)) as f:
                state = json.load(f)
            pid, start = int(state["owner_pid"]), state["owner_start"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if start is not None and _start_time(pid) != start:
            removed += cleanup(m.group(1))
    return removed


def owned_tempdir(prefix, parent="/var/tmp"):
    """A new directory for a harness run (mode 755) that names its owner process, so that
    remove_stale_tempdirs can remove it once that process is gone (a harness killed with SIGKILL)."""
    path = tempfile.mkdtemp(prefix=prefix, dir=parent)
    os.chmod(path, 0o755)
    with open(os.path.join(path, "owner.json"), "w") as f:
        json.dump({"owner_pid": os.getpid(), "owner_start": _start_time(os.getpid())}, f)
    return path


def remove_stale_tempdirs(prefix, parent="/var/tmp"):
    """Removes the directories owned_tempdir made with @p prefix whose owner process no longer exists, and
    the simulated clusters of dead owners (cleanup_stale). Returns the directories removed."""
    removed = []
    for name in sorted(os.listdir(parent)):
        path = os.path.join(parent, name)
        if not name.startswith(prefix) or not os.path.isdir(path):
            continue
        try:
            with open(os.path.join(path, "owner.json")) as f:
                state = json.load(f)
            pid, start = int(state["owner_pid"]), state["owner_start"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if start is not None and _start_time(pid) != start:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    cleanup_stale()
    return removed
