#!/usr/bin/env python3
"""A real Slurm cluster on this machine, for tests: munged, slurmctld and one slurmd from Debian's packages
(slurmctld, slurmd, slurm-client, munge), started as plain child processes with a configuration in a
temporary directory (never as system services), and always torn down (context manager, atexit, SIGTERM).

What makes it work here (docs/launching.md, "Testing with a real Slurm"):
  - munged runs as the munge user with its own key and its socket in a directory of mode 755;
  - ProctrackType=proctrack/linuxproc and TaskPlugin=task/none (no cgroups needed), SelectType=
    select/cons_tres with CR_CPU, and SlurmdParameters=config_overrides so that the node may declare more
    CPUs than the machine has (srun -n 4 on 2 cores);
  - every port is a free loopback port picked at start, so runs do not meet each other or a real Slurm.

Library:
  with SlurmCluster() as c:
      out = c.srun(["-n", "4", "./prog"], timeout=120)       # subprocess.CompletedProcess, text
      proc = c.popen(["srun", "-n", "2", "./prog"])           # a client command with SLURM_CONF set
Only the Python 3 standard library is used. `problem()` says why a cluster cannot start here (not root,
a binary missing); tests then exit 77.
"""
import atexit
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

SKIP_RC = 77
DAEMONS = ("munged", "mungekey", "slurmctld", "slurmd")
CLIENTS = ("srun", "sbatch", "sinfo", "scontrol", "scancel", "squeue")


def _which(name):
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin:/usr/bin")


def problem():
    """Why a cluster cannot start here, or None."""
    if os.geteuid() != 0:
        return "not root (slurmd runs as root)"
    missing = [b for b in DAEMONS + CLIENTS if _which(b) is None]
    if missing:
        return "missing %s (apt-get install slurmctld slurmd slurm-client munge)" % ", ".join(missing)
    try:
        import pwd
        pwd.getpwnam("munge")
    except KeyError:
        return "no munge user (the munge package makes it)"
    return None


_LIBC = ctypes.CDLL(None, use_errno=True)
_PR_SET_PDEATHSIG = 1


def _die_with_parent():
    """In the child before exec: SIGTERM when the test process dies, however it dies (prctl)."""
    _LIBC.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


CONF = """\
ClusterName=cfxtest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SrunPortRange={srun_lo}-{srun_hi}
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket={dir}/munge/munge.socket
CredType=cred/munge
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool/%n
SlurmctldPidFile={dir}/slurmctld.pid
SlurmdPidFile={dir}/slurmd.%n.pid
SlurmctldLogFile={dir}/log/slurmctld.log
SlurmdLogFile={dir}/log/slurmd.%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
MpiDefault=none
ReturnToService=2
KillWait=5
InactiveLimit=0
NodeName={node} NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN
PartitionName=debug Nodes={node} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
"""


class SlurmCluster:
    """One node, `cpus` CPUs declared (more than the machine has is fine: config_overrides)."""

    def __init__(self, cpus=8, node="node0", verbose=False):
        self.cpus, self.node, self.verbose = cpus, node, verbose
        self.dir = None
        self.procs = []  # (name, Popen), in start order
        self._atexit = False

    # ---- set-up and tear-down ----
    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc):
        self.stop()

    def _say(self, msg):
        if self.verbose:
            print("slurm_cluster: " + msg, flush=True)

    def start(self):
        why = problem()
        if why:
            raise RuntimeError("slurm: " + why)
        if not self._atexit:
            atexit.register(self.stop)
            # ctest's timeout and a Ctrl-C end the test with a signal: tear down on the way out.
            for sig in (signal.SIGTERM, signal.SIGHUP):
                signal.signal(sig, lambda signum, _frame: (_ for _ in ()).throw(SystemExit(128 + signum)))
            self._atexit = True
        self.dir = tempfile.mkdtemp(prefix="cfx-slurm-")
        os.chmod(self.dir, 0o755)  # munged (as munge) and slurmd's steps must reach their files
        for sub in ("munge", "state", "spool", "log"):
            os.makedirs(os.path.join(self.dir, sub), mode=0o755, exist_ok=True)
        munge_dir = os.path.join(self.dir, "munge")
        shutil.chown(munge_dir, "munge", "munge")
        os.chmod(munge_dir, 0o755)
        key = os.path.join(munge_dir, "munge.key")
        subprocess.run([_which("mungekey"), "--create", "--keyfile=" + key], user="munge", group="munge",
                       check=True, timeout=30, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        self._spawn("munged", [_which("munged"), "--foreground", "--socket=" + os.path.join(munge_dir, "munge.socket"),
                               "--key-file=" + key, "--pid-file=" + os.path.join(munge_dir, "munged.pid"),
                               "--log-file=" + os.path.join(munge_dir, "munged.log"),
                               "--seed-file=" + os.path.join(munge_dir, "munged.seed")],
                    user="munge", group="munge")
        self._wait_for(lambda: os.path.exists(os.path.join(munge_dir, "munge.socket")), 10, "munged's socket")
        srun_lo = free_port()
        self.conf = os.path.join(self.dir, "slurm.conf")
        with open(self.conf, "w") as f:
            f.write(CONF.format(dir=self.dir, ctld_port=free_port(), slurmd_port=free_port(), srun_lo=srun_lo,
                                srun_hi=min(srun_lo + 50, 65535), node=self.node, cpus=self.cpus))
        os.chmod(self.conf, 0o644)
        self._spawn("slurmctld", [_which("slurmctld"), "-D", "-f", self.conf])
        self._spawn("slurmd", [_which("slurmd"), "-D", "-f", self.conf, "-N", self.node])
        self._wait_for(self._node_idle, 30, "node %s to be idle" % self.node)
        self._say("up in %s" % self.dir)

    def _spawn(self, name, args, **kwargs):
        log = open(os.path.join(self.dir, "log", name + ".out"), "w")
        p = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             env=self.env(), preexec_fn=_die_with_parent, **kwargs)
        log.close()
        self.procs.append((name, p))

    def _wait_for(self, ready, seconds, what):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            for name, p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError("slurm: %s exited (%s) while waiting for %s: %s" % (
                        name, p.returncode, what, self.log_tail(name)))
            if ready():
                return
            time.sleep(0.2)
        raise RuntimeError("slurm: no %s within %d s: %s" % (what, seconds, self.log_tail("slurmd")))

    def _node_idle(self):
        out = subprocess.run([_which("sinfo"), "-h", "-N", "-o", "%t"], env=self.env(), stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True, timeout=10)
        return out.returncode == 0 and out.stdout.strip() == "idle"

    def log_tail(self, name, lines=10):
        for path in (os.path.join(self.dir or "", "log", name + ".log"), os.path.join(self.dir or "", "log", name + ".out")):
            if os.path.exists(path):
                with open(path, errors="replace") as f:
                    return "".join(f.readlines()[-lines:])
        return "(no log)"

    def stop(self):
        """Cancels what still runs, ends the daemons (by their process ids) and removes the directory."""
        if not self.procs and self.dir is None:
            return
        if self.dir and any(n == "slurmctld" and p.poll() is None for n, p in self.procs):
            subprocess.run([_which("scancel"), "--full", "--user=root"], env=self.env(), timeout=10,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            end = time.monotonic() + 10
            while time.monotonic() < end and self._jobs_left():
                time.sleep(0.2)
        for name, p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(timeout=10)
        self.procs = []
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def _jobs_left(self):
        out = subprocess.run([_which("squeue"), "-h", "-o", "%i"], env=self.env(), stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True, timeout=10)
        return out.returncode == 0 and out.stdout.strip() != ""

    # ---- clients ----
    def env(self, extra=None):
        e = dict(os.environ)
        if self.dir:
            e["SLURM_CONF"] = os.path.join(self.dir, "slurm.conf")
        for k in list(e):
            if k.startswith("SLURM_") and k != "SLURM_CONF":
                del e[k]  # a test run inside a real Slurm job must not leak that job's variables
        e.update(extra or {})
        return e

    def popen(self, args, env=None, **kwargs):
        """A client command (srun, sbatch, ...) against this cluster."""
        return subprocess.Popen(args, env=self.env(env), **kwargs)

    def srun(self, args, env=None, timeout=120):
        """srun ARGS..., its output (stdout and stderr together) as text."""
        return subprocess.run([_which("srun")] + list(args), env=self.env(env), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=timeout)

    def client(self, name):
        return _which(name)
