#!/usr/bin/env python3
"""A real Slurm cluster on this machine, for tests: munged, slurmctld and slurmd from Debian's packages
(slurmctld, slurmd, slurm-client, munge), started as plain child processes with a configuration in a
temporary directory (never as system services), and always torn down (context manager, atexit, SIGTERM).

One node: every daemon on loopback. Several (nodes=2): simulated nodes from tests/netns/netns_cluster.py,
one network namespace per node joined by a bridge (node i at 10.200.0.<i+1>); each slurmd runs in its
node's namespace (entered with nsenter --net, not `ip netns exec`, which remounts /sys and breaks slurmd)
and in UTS and mount namespaces of its own: its hostname is the node's name, so that the tasks of
different nodes see different hosts (Conflux's node identity is the hostname and boot id), and an
/etc/hosts naming the nodes is mounted on its /etc/hosts. Each node has its own TmpFS (TmpFS=.../%n), where
Slurm's PMIx plugin makes its per-step directories (named after the step only, they would collide). slurmctld and the clients (srun, sbatch) run in node 0's namespace.

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
import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "netns"))
import netns_cluster  # noqa: E402

SKIP_RC = 77
DAEMONS = ("munged", "mungekey", "slurmctld", "slurmd")
CLIENTS = ("srun", "sbatch", "sinfo", "scontrol", "scancel", "squeue")


def _which(name):
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin:/usr/bin")


def problem(nodes=1):
    """Why a cluster of `nodes` cannot start here, or None."""
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
    if nodes > 1:
        why = netns_cluster.capability_problem()
        if why:
            return why
        if _which("nsenter") is None or _which("unshare") is None:
            return "nsenter or unshare missing (util-linux)"
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
SlurmctldHost={ctld_host}({ctld_addr})
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SrunPortRange={srun_lo}-{srun_hi}
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket={dir}/munge/munge.socket
CredType=cred/munge
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool/%n
TmpFS={dir}/tmp/%n
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
{node_lines}
PartitionName=debug Nodes={node_list} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
"""


class SlurmCluster:
    """`nodes` nodes named node0.., each declaring `cpus` CPUs (more than the machine has is fine:
    config_overrides)."""

    def __init__(self, nodes=1, cpus=8, verbose=False):
        self.nodes, self.cpus, self.verbose = nodes, cpus, verbose
        self.names = ["node%d" % i for i in range(nodes)]
        self.dir = None
        self.net = None  # netns_cluster.Cluster when nodes > 1
        self.procs = []  # (name, Popen), in start order
        self._atexit = False

    def addr(self, i):
        return "127.0.0.1" if self.net is None else self.net.addr(i)

    def _in_node(self, i, cmd, hostname=None):
        """`cmd` run in node i's network namespace (and, given a hostname, a UTS namespace with that name)."""
        if self.net is None:
            return list(cmd)
        if hostname:
            # A host of its own: its name, and an /etc/hosts naming the nodes.
            return self.net.host_args(i, cmd, hostname, self.hosts)
        return [_which("nsenter"), "--net=/run/netns/" + self.net.node_ns(i), "--"] + list(cmd)

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
        why = problem(self.nodes)
        if why:
            raise RuntimeError("slurm: " + why)
        if not self._atexit:
            atexit.register(self.stop)
            # ctest's timeout and a Ctrl-C end the test with a signal: tear down on the way out.
            for sig in (signal.SIGTERM, signal.SIGHUP):
                signal.signal(sig, lambda signum, _frame: (_ for _ in ()).throw(SystemExit(128 + signum)))
            self._atexit = True
        # Mode 755: munged (as munge) and slurmd's steps must reach their files. Runs killed outright
        # (SIGKILL) left theirs: removed.
        netns_cluster.remove_stale_tempdirs("cfx-slurm-")
        self.dir = netns_cluster.owned_tempdir("cfx-slurm-")
        for sub in ["munge", "state", "spool", "log"] + [os.path.join("spool", n) for n in self.names]:
            os.makedirs(os.path.join(self.dir, sub), mode=0o755, exist_ok=True)
        for n in self.names:  # TmpFS: each node's (PMIx's per-step directories are named after the step only)
            os.makedirs(os.path.join(self.dir, "tmp", n), mode=0o1777, exist_ok=True)
            os.chmod(os.path.join(self.dir, "tmp", n), 0o1777)
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
        if self.nodes > 1:
            self.net = netns_cluster.Cluster(nodes=self.nodes, signals=False)
            self.net.create()
            self.hosts = os.path.join(self.dir, "hosts")
            with open(self.hosts, "w") as f:
                f.write("127.0.0.1 localhost\n%s ctl\n" % self.addr(0))
                f.writelines("%s %s\n" % (self.addr(i), n) for i, n in enumerate(self.names))
            os.chmod(self.hosts, 0o644)
        srun_lo = free_port()
        node_lines = "\n".join("NodeName=%s NodeAddr=%s NodeHostname=%s CPUs=%d State=UNKNOWN" % (
            n, self.addr(i), n, self.cpus) for i, n in enumerate(self.names))
        self.conf = os.path.join(self.dir, "slurm.conf")
        with open(self.conf, "w") as f:
            f.write(CONF.format(dir=self.dir, ctld_port=free_port(), slurmd_port=free_port(), srun_lo=srun_lo,
                                srun_hi=min(srun_lo + 50, 65535), ctld_host="ctl" if self.net else "localhost",
                                ctld_addr=self.addr(0), node_lines=node_lines, node_list=",".join(self.names)))
        os.chmod(self.conf, 0o644)
        # slurmctld checks that its host's name is SlurmctldHost's ("localhost" passes on one node).
        self._spawn("slurmctld", self._in_node(0, [_which("slurmctld"), "-D", "-f", self.conf], hostname="ctl"))
        for i, n in enumerate(self.names):
            self._spawn("slurmd." + n, self._in_node(i, [_which("slurmd"), "-D", "-f", self.conf, "-N", n], hostname=n))
        self._wait_for(self._nodes_idle, 30, "every node to be idle")
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
        raise RuntimeError("slurm: no %s within %d s: %s" % (what, seconds, self.log_tail("slurmd." + self.names[-1])))

    def _nodes_idle(self):
        out = subprocess.run(self.client_args(["sinfo", "-h", "-N", "-o", "%t"]), env=self.env(),
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, timeout=10)
        return out.returncode == 0 and out.stdout.split() == ["idle"] * self.nodes

    def log_tail(self, name, lines=10):
        for path in (os.path.join(self.dir or "", "log", name + ".log"), os.path.join(self.dir or "", "log", name + ".out")):
            if os.path.exists(path):
                with open(path, errors="replace") as f:
                    return "".join(f.readlines()[-lines:])
        return "(no log)"

    def stop(self):
        """Cancels what still runs, ends the daemons (by their process ids), removes the simulated nodes and
        the directory. Each step runs whatever the one before did, and signals wait until the end."""
        if not self.procs and self.dir is None and self.net is None:
            return
        old = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
        try:
            with contextlib.suppress(Exception):
                if self.dir and any(n == "slurmctld" and p.poll() is None for n, p in self.procs):
                    subprocess.run(self.client_args(["scancel", "--full", "--user=root"]), env=self.env(), timeout=10,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    end = time.monotonic() + 10
                    while time.monotonic() < end and self._jobs_left():
                        time.sleep(0.2)
            for name, p in reversed(self.procs):
                with contextlib.suppress(Exception):
                    if p.poll() is None:
                        p.send_signal(signal.SIGTERM)
                        try:
                            p.wait(timeout=10)
                        except subprocess.TimeoutExpired:
                            p.kill()
                            p.wait(timeout=10)
            self.procs = []
            if self.net is not None:
                with contextlib.suppress(Exception):
                    self.net.destroy()
                self.net = None
            if self.dir:
                shutil.rmtree(self.dir, ignore_errors=True)
                self.dir = None
        finally:
            for sig, handler in old.items():
                signal.signal(sig, handler)

    def _jobs_left(self):
        out = subprocess.run(self.client_args(["squeue", "-h", "-o", "%i"]), env=self.env(), stdout=subprocess.PIPE,
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

    def client_args(self, cmd):
        """A client command line (its first word a Slurm client's name), run where clients run (node 0)."""
        return self._in_node(0, [_which(cmd[0])] + list(cmd[1:]))

    def popen(self, cmd, env=None, **kwargs):
        """A client command (srun, sbatch, ...) against this cluster."""
        return subprocess.Popen(self.client_args(cmd), env=self.env(env), **kwargs)

    def run(self, cmd, env=None, timeout=120, **kwargs):
        """A client command, its output (stdout and stderr together) as text."""
        return subprocess.run(self.client_args(cmd), env=self.env(env), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=timeout, **kwargs)

    def srun(self, args, env=None, timeout=120):
        """srun ARGS..., its output (stdout and stderr together) as text."""
        return self.run(["srun"] + list(args), env=env, timeout=timeout)
