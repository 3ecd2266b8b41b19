#!/usr/bin/env python3
"""Simulated nodes on one machine: network namespaces joined by veth pairs and Linux bridges.

Layout (docs/netns.md has the diagram): one namespace per node, <prefix>-n<i>, and one "switch"
namespace, <prefix>-sw, holding one Linux bridge per rail (br<k>). Node i's rail k is a veth pair created
inside the namespaces (never in the host's): rail<k> in the node, n<i>r<k> in the switch, enslaved to br<k>.
Rail k is the subnet 10.200.<k>.0/24 and node i's address on it is 10.200.<k>.<i+1>. With --rails per-rank
every local rank gets its own rail (local rank k uses rail<k>), else all ranks share rail0 (or --rails N).
An optional tc tbf rate limit shapes both directions of every inter-node link: egress of rail<k> in the
node and egress of n<i>r<k> towards the node, like a full-duplex NIC.
With several rails the switch also routes between them, as one fabric joins every NIC of a cluster: br<k>
holds 10.200.<k>.254, and each node sends what leaves from its rail-k address through rail<k> (a routing
table per rail, chosen by source address), so a message from local rank i to a peer's rail j leaves by
rail<i> and arrives by rail<j>: the sender's NIC out, the receiver's NIC in, as on a real multi-rail
cluster. (Without it, the kernel would pick the rail by the destination's subnet, both ways.)

Everything the harness creates is named from a per-run random prefix and deleted on exit (context manager,
try/finally, SIGINT/SIGTERM/SIGHUP handlers, atexit); `cleanup --prefix P` removes a crashed run's leftovers.
It touches nothing else: no host interfaces, addresses, routes or firewall rules.

CLI (run as root; `check` exits 77 with "netns: skipped: <reason>" where namespaces are unavailable):
  netns_cluster.py check [--tc] [--iperf3]
  netns_cluster.py run --nodes 2 --ranks-per-node 2 [--rails 1|N|per-rank] [--rate 2gbit] [--prefix P]
                       [--timeout 300] [--fail-grace 30] [--env K=V ...] -- CMD ARGS...
  netns_cluster.py up --nodes 2 [...]               create, print the layout, hold until SIGINT/SIGTERM
  netns_cluster.py link-down --prefix P NODE [RAIL] [--end switch|node]     (link-up: the same arguments)
  netns_cluster.py iperf3 --from n0 --to n1 [--seconds 3] [--prefix P | --rate R]
  netns_cluster.py tcp-rate --from n0 --to n1 [--seconds 1] [--prefix P | --rate R]   (python sockets)
  netns_cluster.py cleanup --prefix P | --stale      (--stale: runs whose owner process is gone)

Library:
  with Cluster(nodes=2, ranks_per_node=2, rails="per-rank", rate="200mbit") as c:
      job = c.start(["./prog"], env={"CONFLUX_TIMEOUT_MS": "5000"})
      c.link_down(1)                     # node 1's links go down (switch side: the node sees NO-CARRIER)
      result = job.wait(timeout=60)      # JobResult: returncode, per-rank exit codes and output lines
Only the Python 3 standard library is used.
"""
import argparse
import atexit
import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from netns_jobs import TIMEOUT_RC, Job, JobResult, RankProc, kill_group, pump_output  # noqa: E402,F401
from netns_ownership import (PREFIX_RE, HarnessError, _cmd, _start_time, check_prefix, cleanup,  # noqa: E402,F401
                             cleanup_stale, list_netns, owned_netns, owned_tempdir, remove_stale_tempdirs,
                             state_path)

SKIP_RC = 77
SELF = os.path.abspath(__file__)
PROBES = os.path.join(os.path.dirname(SELF), "netns_probes.py")
_PLACEHOLDER = re.compile(r"\{(node|rank|local_rank|rail|iface|addr)\}")
MAX_RAILS = 64
MAX_NODES = 250


class Unavailable(Exception):
    """Namespaces (or tc, or iperf3) cannot be used here; the message says why."""


# ---------------------------------------------------------------------------------------------- helpers
def random_prefix():
    """A fresh namespace prefix, so that parallel runs never meet."""
    return "cfxt" + secrets.token_hex(3)


def parse_rate(text):
    """tc rate syntax ("200mbit", "2gbit", "100mbps", "1e9bit") -> bits per second."""
    m = re.fullmatch(r"([0-9.]+(?:e[0-9]+)?)\s*([kmgt]?)(bit|bps)?", text.strip().lower())
    if not m:
        raise HarnessError("rate %r: use tc's syntax, e.g. 200mbit or 2gbit" % text)
    value = float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}[m.group(2)]
    if m.group(3) == "bps":
        value *= 8
    if value < 8000:
        raise HarnessError("rate %r is below 8kbit" % text)
    return value


def parse_node(text):
    m = re.fullmatch(r"n?(\d+)", str(text))
    if not m:
        raise HarnessError("node %r: use 0, 1, ... or n0, n1, ..." % text)
    return int(m.group(1))


# -------------------------------------------------------------------------------------- capabilities
def capability_problem():
    """None when namespaces and veth pairs can be created and deleted here, else the reason."""
    if sys.platform != "linux":
        return "not Linux"
    if not shutil.which("ip"):
        return "the 'ip' command (iproute2) is not installed"
    ns = random_prefix() + "-chk"
    try:
        p = _cmd(["ip", "netns", "add", ns], check=False)
        if p.returncode != 0:
            return "cannot create a network namespace (%s)%s" % (
                p.stderr.strip(), "; run as root" if os.geteuid() != 0 else "")
        for args in (["ip", "-n", ns, "link", "add", "cfxchk0", "type", "veth", "peer", "name", "cfxchk1"],
                     ["ip", "-n", ns, "link", "add", "cfxchkbr", "type", "bridge"],
                     ["ip", "-n", ns, "link", "set", "cfxchk1", "master", "cfxchkbr"],
                     ["ip", "-n", ns, "link", "set", "lo", "up"]):
            p = _cmd(args, check=False)
            if p.returncode != 0:
                return "'%s' failed: %s" % (" ".join(args), p.stderr.strip())
        return None
    except (OSError, subprocess.TimeoutExpired) as e:
        return str(e)
    finally:
        if ns in list_netns():
            _cmd(["ip", "netns", "delete", ns], check=False)


def tc_problem():
    """None when tc can attach a tbf qdisc to a veth inside a namespace, else the reason."""
    if not shutil.which("tc"):
        return "the 'tc' command (iproute2) is not installed"
    ns = random_prefix() + "-chk"
    try:
        if _cmd(["ip", "netns", "add", ns], check=False).returncode != 0:
            return "cannot create a network namespace"
        _cmd(["ip", "-n", ns, "link", "add", "cfxchk0", "type", "veth", "peer", "name", "cfxchk1"], check=False)
        p = _cmd(["tc", "-n", ns, "qdisc", "add", "dev", "cfxchk0", "root", "tbf", "rate", "100mbit", "burst",
                  "32kb", "latency", "50ms"], check=False)
        return None if p.returncode == 0 else "tc tbf is unavailable: " + p.stderr.strip()
    finally:
        if ns in list_netns():
            _cmd(["ip", "netns", "delete", ns], check=False)


def iperf3_problem():
    return None if shutil.which("iperf3") else "iperf3 is not installed (apt-get install iperf3)"


# ------------------------------------------------------------------------------------------- signals
class _Interrupted(SystemExit):
    pass


@contextlib.contextmanager
def cleanup_on_signals():
    """Within the block, SIGINT/SIGTERM/SIGHUP raise SystemExit(128 + signal), so every `finally` and
    `with Cluster` runs; the previous handlers come back afterwards. A no-op outside the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, _frame):
        raise _Interrupted(128 + signum)

    sigs = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    old = {s: signal.signal(s, handler) for s in sigs}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


@contextlib.contextmanager
def _signals_ignored():
    """Cleanup is not interrupted by a second Ctrl-C or SIGTERM (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    sigs = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    old = {s: signal.signal(s, signal.SIG_IGN) for s in sigs}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


# ------------------------------------------------------------------------------------------- cluster
class Cluster:
    """N simulated nodes (network namespaces) joined by one bridge per rail; see the module comment.

    Use as a context manager (or call create()/destroy()): everything created is deleted on exit, also on
    exceptions and (in the main thread) on SIGINT/SIGTERM/SIGHUP."""

    def __init__(self, nodes=2, ranks_per_node=1, rails="1", rate=None, prefix=None, verbose=False,
                 signals=True):
        self.nodes = int(nodes)
        # One count for every node, or one per node ("2,1": uneven nodes).
        counts = [int(x) for x in str(ranks_per_node).split(",")] if not isinstance(ranks_per_node, int) \
            else [ranks_per_node]
        self.node_ranks = counts * self.nodes if len(counts) == 1 else counts
        if not 1 <= self.nodes <= MAX_NODES or len(self.node_ranks) != self.nodes or min(self.node_ranks) < 1:
            raise HarnessError("need 1..%d nodes and at least 1 rank on each (one count, or one per node)" % MAX_NODES)
        self.ranks_per_node = max(self.node_ranks)
        self.per_rank_rails = str(rails) == "per-rank"
        self.rails = self.ranks_per_node if self.per_rank_rails else int(rails)
        if not 1 <= self.rails <= MAX_RAILS:
            raise HarnessError("rails must be 1..%d or per-rank" % MAX_RAILS)
        self.rate = rate
        if rate is not None:
            parse_rate(rate)
        self.prefix = check_prefix(prefix or random_prefix())
        self.verbose = verbose
        self.secret = secrets.token_hex(32)
        self._signals = signals
        self._created = []   # namespaces this object created, in creation order
        self._jobs = []
        self._owner = True
        self._stack = None

    # -- names and addresses
    @property
    def switch_ns(self):
        return "%s-sw" % self.prefix

    def node_ns(self, node):
        return "%s-n%d" % (self.prefix, node)

    @staticmethod
    def iface(rail):
        """The node-side interface of rail @p rail (the same name in every node)."""
        return "rail%d" % rail

    @staticmethod
    def switch_port(node, rail):
        return "n%dr%d" % (node, rail)

    @staticmethod
    def addr(node, rail=0):
        return "10.200.%d.%d" % (rail, node + 1)

    def total_ranks(self):
        return sum(self.node_ranks)

    def locate(self, rank):
        """(node, local rank) of global rank @p rank: nodes hold consecutive ranks."""
        for node, count in enumerate(self.node_ranks):
            if rank < count:
                return node, rank
            rank -= count
        raise HarnessError("rank out of range")

    def rail_of(self, local_rank):
        return local_rank if self.per_rank_rails else 0

    def namespaces(self):
        return [self.node_ns(i) for i in range(self.nodes)] + [self.switch_ns]

    # -- lifecycle
    def __enter__(self):
        self._stack = contextlib.ExitStack()
        if self._signals:
            self._stack.enter_context(cleanup_on_signals())
        try:
            self.create()
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc):
        try:
            self.destroy()
        finally:
            if self._stack is not None:
                self._stack.close()
        return False

    def _say(self, msg):
        print(msg, file=sys.stderr, flush=True)

    def _ip(self, *args):
        if self.verbose:
            self._say("netns: ip " + " ".join(args))
        return _cmd(["ip"] + list(args))

    def _add_ns(self, name):
        if name in list_netns():
            raise HarnessError("namespace %s already exists (another run with this prefix?)" % name)
        self._ip("netns", "add", name)
        self._created.append(name)
        self._ip("-n", name, "link", "set", "lo", "up")

    def create(self):
        """Creates the namespaces, bridges, veths, addresses and rate limits. On failure it deletes what it
        created and raises HarnessError."""
        problem = None if shutil.which("ip") else "the 'ip' command is not installed"
        if problem:
            raise Unavailable(problem)
        atexit.register(self.destroy)
        try:
            self._write_state()  # first, so that `cleanup --stale` finds a run killed mid-create
            sw = self.switch_ns
            self._add_ns(sw)
            for k in range(self.rails):
                self._ip("-n", sw, "link", "add", "br%d" % k, "type", "bridge", "stp_state", "0",
                         "forward_delay", "0")
                self._ip("-n", sw, "link", "set", "br%d" % k, "up")
            for i in range(self.nodes):
                ns = self.node_ns(i)
                self._add_ns(ns)
                for k in range(self.rails):
                    port = self.switch_port(i, k)
                    # Both ends are born inside namespaces: the host's network is never touched.
                    self._ip("-n", ns, "link", "add", self.iface(k), "type", "veth", "peer", "name", port,
                             "netns", sw)
                    self._ip("-n", ns, "addr", "add", self.addr(i, k) + "/24", "dev", self.iface(k))
                    self._ip("-n", sw, "link", "set", port, "master", "br%d" % k)
                    self._ip("-n", sw, "link", "set", port, "up")
                    self._ip("-n", ns, "link", "set", self.iface(k), "up")
            if self.rails > 1:
                self._route_between_rails()
            if self.rate:
                self.set_rate(self.rate)
            self._write_state()
        except BaseException:
            self.destroy()
            raise
        return self

    ROUTER_HOST = 254  # the switch's address on every rail's subnet

    def _sysctl(self, ns, key, value):
        """Sets /proc/sys/<key with dots as slashes> inside namespace @p ns (no procps needed)."""
        path = "/proc/sys/" + key.replace(".", "/")
        _cmd(["ip", "netns", "exec", ns, "sh", "-c", 'echo "$0" > "$1"', str(value), path])

    def _route_between_rails(self):
        """The switch forwards between its rail bridges; each node routes by source address, so that
        traffic leaves by the rail its source address is on (see the module comment)."""
        sw = self.switch_ns
        self._sysctl(sw, "net.ipv4.ip_forward", 1)
        for k in range(self.rails):
            self._ip("-n", sw, "addr", "add", "10.200.%d.%d/24" % (k, self.ROUTER_HOST), "dev", "br%d" % k)
        for i in range(self.nodes):
            ns = self.node_ns(i)
            # Replies arrive by the receiver's rail but come from the sender's: no reverse-path filter.
            self._sysctl(ns, "net.ipv4.conf.all.rp_filter", 0)
            for k in range(self.rails):
                self._sysctl(ns, "net.ipv4.conf.%s.rp_filter" % self.iface(k), 0)
                self._rail_routes(i, k)
                # With the rail down (its routes gone), what leaves from its address is unreachable at once,
                # as with one rail, rather than falling through to another rail.
                self._ip("-n", ns, "route", "add", "unreachable", "10.200.0.0/16", "metric", "65535", "table",
                         str(100 + k))
                self._ip("-n", ns, "rule", "add", "from", self.addr(i, k), "lookup", str(100 + k), "priority",
                         str(1000 + k))

    def _rail_routes(self, node, k):
        """Node @p node's routing table for rail @p k. The kernel drops a table's routes through an
        interface when it goes down, so a node-side link_up puts them back."""
        ns, table = self.node_ns(node), str(100 + k)
        self._ip("-n", ns, "route", "replace", "10.200.%d.0/24" % k, "dev", self.iface(k), "src",
                 self.addr(node, k), "table", table)
        self._ip("-n", ns, "route", "replace", "10.200.0.0/16", "via", "10.200.%d.%d" % (k, self.ROUTER_HOST),
                 "dev", self.iface(k), "table", table)

    def destroy(self):
        """Kills running ranks and every process left in the namespaces it created (by pid), then deletes
        those namespaces (which deletes their veths and bridges) and the control file. Idempotent."""
        with _signals_ignored():
            self._destroy()

    def _destroy(self):
        for job in list(self._jobs):
            job.kill()
            with contextlib.suppress(Exception):
                job.wait(timeout=5)
        self._jobs.clear()
        if not self._owner:
            return
        errors = []
        for ns in reversed(self._created):
            with contextlib.suppress(Exception):
                pids = _cmd(["ip", "netns", "pids", ns], check=False).stdout.split()
                for pid in pids:
                    with contextlib.suppress(ProcessLookupError, ValueError):
                        os.kill(int(pid), signal.SIGKILL)
            p = _cmd(["ip", "netns", "delete", ns], check=False)
            if p.returncode != 0 and ns in list_netns():
                errors.append("%s: %s" % (ns, p.stderr.strip()))
        self._created.clear()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(state_path(self.prefix))
        with contextlib.suppress(Exception):
            atexit.unregister(self.destroy)
        if errors:
            self._say("netns: cleanup problems: " + "; ".join(errors))

    @classmethod
    def attach(cls, prefix):
        """A Cluster object for namespaces another process created (`run`/`up`): for link-down/up, exec,
        iperf3. It never deletes them."""
        names = owned_netns(check_prefix(prefix))
        nodes = sorted(int(n.rsplit("-n", 1)[1]) for n in names if re.fullmatch(r".*-n\d+", n))
        if not nodes or "%s-sw" % prefix not in names:
            raise HarnessError("no cluster with prefix %s (ip netns list)" % prefix)
        rails = len([l for l in _cmd(["ip", "-n", "%s-sw" % prefix, "-o", "link", "show", "type", "bridge"]).
                     stdout.splitlines() if l.strip()])
        c = cls(nodes=max(nodes) + 1, rails=rails, prefix=prefix, signals=False)
        c._owner = False
        return c

    def _write_state(self):
        if not self._owner:
            return
        state = {
            "prefix": self.prefix, "owner_pid": os.getpid(), "owner_start": _start_time(os.getpid()),
            "switch": self.switch_ns, "rate": self.rate, "rails": self.rails,
            "nodes": [{"namespace": self.node_ns(i), "hostid": "node%d" % i,
                       "interfaces": {self.iface(k): self.addr(i, k) for k in range(self.rails)},
                       "switch_ports": [self.switch_port(i, k) for k in range(self.rails)]}
                      for i in range(self.nodes)],
            "ranks": [{"rank": r.rank, "node": r.node, "pid": r.popen.pid} for j in self._jobs for r in j.ranks],
            "link_down": "%s link-down --prefix %s NODE [RAIL]" % (SELF, self.prefix),
        }
        path = state_path(self.prefix)
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(state, f, indent=1)
        os.replace(tmp, path)

    def describe(self):
        per_node = str(self.node_ranks[0]) if len(set(self.node_ranks)) == 1 else "+".join(map(str, self.node_ranks))
        lines = ["netns: cluster %s: %d node(s) x %s rank(s), %d rail(s)%s; switch namespace %s" % (
            self.prefix, self.nodes, per_node, self.rails,
            ", rate %s per link and direction" % self.rate if self.rate else "", self.switch_ns)]
        for i in range(self.nodes):
            lines.append("netns:   node %d: %s  %s" % (i, self.node_ns(i), "  ".join(
                "%s=%s" % (self.iface(k), self.addr(i, k)) for k in range(self.rails))))
        lines.append("netns:   control file %s; fault injection: %s link-down --prefix %s NODE [RAIL]" % (
            state_path(self.prefix), os.path.basename(SELF), self.prefix))
        return "\n".join(lines)

    # -- links
    def link_down(self, node, rail=None, end="switch"):
        """Takes node @p node's link(s) down (all rails unless @p rail). end="switch" downs the switch port
        (the node keeps its address but sees NO-CARRIER, packets vanish: a pulled cable); end="node" downs
        the node's own interface (its routes go away, sends fail at once)."""
        self._set_link(node, rail, end, "down")

    def link_up(self, node, rail=None, end="switch"):
        """Undoes link_down."""
        self._set_link(node, rail, end, "up")

    def _set_link(self, node, rail, end, state):
        if not 0 <= node < self.nodes or (rail is not None and not 0 <= rail < self.rails):
            raise HarnessError("no node %s rail %s in %s" % (node, rail, self.prefix))
        for k in ([rail] if rail is not None else range(self.rails)):
            if end == "switch":
                self._ip("-n", self.switch_ns, "link", "set", self.switch_port(node, k), state)
            elif end == "node":  # the connected route goes and comes back with the link
                self._ip("-n", self.node_ns(node), "link", "set", self.iface(k), state)
                if state == "up" and self.rails > 1:
                    self._rail_routes(node, k)  # the per-rail table's routes do not come back by themselves
            else:
                raise HarnessError("end must be 'switch' or 'node'")

    def set_rate(self, rate, nodes=None):
        """Rate-limits the links of @p nodes (default: every node) in both directions with tc tbf
        (replacing any limit)."""
        bps = parse_rate(rate)
        burst = max(int(bps / 8 * 0.004), 16 * 1514)  # >= rate/HZ for HZ 250, and a few full frames
        for i in (range(self.nodes) if nodes is None else nodes):
            for k in range(self.rails):
                for ns, dev in ((self.node_ns(i), self.iface(k)), (self.switch_ns, self.switch_port(i, k))):
                    _cmd(["tc", "-n", ns, "qdisc", "replace", "dev", dev, "root", "tbf", "rate", rate,
                          "burst", str(burst), "latency", "50ms"])
        self.rate = rate

    def clear_rate(self):
        for i in range(self.nodes):
            for k in range(self.rails):
                for ns, dev in ((self.node_ns(i), self.iface(k)), (self.switch_ns, self.switch_port(i, k))):
                    _cmd(["tc", "-n", ns, "qdisc", "del", "dev", dev, "root"], check=False)
        self.rate = None

    # -- processes
    def exec_args(self, node, cmd):
        return ["ip", "netns", "exec", self.node_ns(node)] + list(cmd)

    def host_args(self, node, cmd, hostname, hosts):
        """@p cmd run as a host of its own inside node @p node: its network namespace entered with nsenter
        (not `ip netns exec`, which remounts /sys: slurmd breaks), and UTS and mount namespaces of its own
        whose hostname is @p hostname, with file @p hosts mounted on /etc/hosts (names resolve as a cluster's
        DNS would have them). The file system is otherwise the machine's (the build, wherever it is, stays
        visible). The process is @p cmd itself once it runs (every step execs), so its process id is the
        one to signal."""
        script = 'hostname "$0" && mount --bind "$1" /etc/hosts && shift && exec "$@"'
        return ["nsenter", "--net=/run/netns/" + self.node_ns(node), "--", "unshare", "--uts", "--mount",
                "--propagation", "private", "--", "sh", "-c", script, hostname, hosts] + list(cmd)

    def popen(self, node, cmd, **kwargs):
        """Starts @p cmd inside node @p node's namespace (subprocess.Popen arguments pass through)."""
        return subprocess.Popen(self.exec_args(node, cmd), **kwargs)

    def run_in(self, node, cmd, timeout=60, check=False):
        """Runs @p cmd inside node @p node and returns the CompletedProcess (text output)."""
        return _cmd(self.exec_args(node, cmd), check=check, timeout=timeout)

    def rank_env(self, rank, port):
        node, lr = self.locate(rank)
        return {
            "CONFLUX_HOSTID": "node%d" % node,
            "CONFLUX_RANK": str(rank),
            "CONFLUX_NRANKS": str(self.total_ranks()),
            "CONFLUX_LOCAL_RANK": str(lr),
            "CONFLUX_LOCAL_SIZE": str(self.node_ranks[node]),
            "CONFLUX_BOOTSTRAP_ADDR": "%s:%d" % (self.addr(0, 0), port),
            "CONFLUX_SECRET": self.secret,
            "CONFLUX_SOCKET_IFNAME": self.iface(self.rail_of(lr)),
            # Leave by the rank's own rail, as from a NIC per rank (libfabric binds by itself).
            "CONFLUX_TCP_BIND_SOURCE": "1" if self.rails > 1 else "0",
            "CONFLUX_JOB_ID": self.prefix,
            "NETNS_CLUSTER_PREFIX": self.prefix,
            "NETNS_CLUSTER_NODE": str(node),
        }

    def start(self, cmd, env=None, capture=False, echo=True, port=None):
        """Launches one copy of @p cmd per rank, nodes holding consecutive ranks (node i's local rank k),
        each as `ip netns exec <node ns> env CONFLUX_...=... cmd` in its own process group. Output lines
        are echoed prefixed "[node i rank r]" (@p echo) and kept in the result (@p capture). @p env adds
        variables for every rank; in its values {node} {rank} {local_rank} {rail} {iface} {addr} become the
        rank's own (e.g. {"FI_TCP_IFACE": "{iface}"}). Returns a Job; call job.wait()."""
        if not cmd:
            raise HarnessError("no command to run")
        port = port or 20000 + secrets.randbelow(20000)
        ranks = []
        try:
            for rank in range(self.total_ranks()):
                node, lr = self.locate(rank)
                vars_ = self.rank_env(rank, port)
                fields = {"node": node, "rank": rank, "local_rank": lr, "rail": self.rail_of(lr),
                          "iface": self.iface(self.rail_of(lr)), "addr": self.addr(node, self.rail_of(lr))}
                for k, v in (env or {}).items():
                    vars_[k] = _PLACEHOLDER.sub(lambda m: str(fields[m.group(1)]), str(v))
                args = self.exec_args(node, ["env"] + ["%s=%s" % kv for kv in vars_.items()] + list(cmd))
                p = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, start_new_session=True)
                rp = RankProc(rank, node, lr, p)
                for name, stream, sink in (("stdout", p.stdout, sys.stdout), ("stderr", p.stderr, sys.stderr)):
                    t = threading.Thread(target=pump_output, args=(rp, name, stream, sink if echo else None, capture),
                                         daemon=True)
                    t.start()
                    rp.threads.append(t)
                ranks.append(rp)
        finally:
            job = Job(self, ranks)
            self._jobs.append(job)
            self._write_state()
        return job

    def run(self, cmd, timeout=300.0, fail_grace=30.0, **kwargs):
        """start() + wait(): returns the JobResult."""
        return self.start(cmd, **kwargs).wait(timeout=timeout, fail_grace=fail_grace)

    # -- measurements
    def ping(self, src, dst, rail=0, timeout=2.0):
        """True when node @p src gets an ICMP echo reply from node @p dst's address on @p rail."""
        p = self.run_in(src, [sys.executable, PROBES, "ping", self.addr(dst, rail), "--timeout", str(timeout)],
                        timeout=timeout + 10)
        return p.returncode == 0

    def tcp_rate(self, src, dst, seconds=1.0, rail=0):
        """Bits per second of one TCP stream from node @p src to node @p dst, measured at the receiver with
        plain Python sockets (no iperf3 needed)."""
        port = 20000 + secrets.randbelow(20000)
        sink = self.popen(dst, [sys.executable, PROBES, "tcp-sink", "--bind", self.addr(dst, rail), "--port",
                                str(port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          start_new_session=True)
        try:
            if sink.stdout.readline().strip() != "ready":
                raise HarnessError("tcp sink did not start: " + sink.stderr.read())
            self.run_in(src, [sys.executable, PROBES, "tcp-source", "--to", self.addr(dst, rail), "--port",
                              str(port), "--seconds", str(seconds)], timeout=seconds + 60, check=True)
            out, err = sink.communicate(timeout=60)
            if sink.returncode != 0:
                raise HarnessError("tcp sink failed: " + err)
            nbytes, secs = out.split()
            return int(nbytes) * 8 / float(secs)
        finally:
            if sink.poll() is None:
                kill_group(sink.pid, signal.SIGKILL)
                sink.wait()

    def iperf3(self, src, dst, seconds=3, rail=0, bidir=False):
        """Bits per second iperf3 measures from node @p src to node @p dst (@p bidir: both directions at
        once, the mean of the two). Raises Unavailable without iperf3."""
        problem = iperf3_problem()
        if problem:
            raise Unavailable(problem)
        port = str(5201 + secrets.randbelow(1000))
        server = self.popen(dst, ["iperf3", "-s", "-1", "-B", self.addr(dst, rail), "-p", port],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            for _attempt in range(50):
                p = self.run_in(src, ["iperf3", "-c", self.addr(dst, rail), "-p", port, "-t", str(seconds), "-J"]
                                + (["--bidir"] if bidir else []), timeout=seconds + 60)
                try:  # iperf3 3.12 -J exits 0 even when it cannot connect; the JSON says "error"
                    report = json.loads(p.stdout)
                except ValueError:
                    report = {"error": (p.stdout + p.stderr)[-500:]}
                if p.returncode == 0 and "error" not in report:
                    end = report["end"]
                    rate = float(end["sum_received"]["bits_per_second"])
                    if bidir:
                        rate = (rate + float(end["sum_received_bidir_reverse"]["bits_per_second"])) / 2
                    return rate
                error = str(report.get("error", "")) + p.stderr
                if "refused" not in error or server.poll() is not None:
                    raise HarnessError("iperf3 client failed: " + error[-500:])
                time.sleep(0.1)
            raise HarnessError("iperf3 server did not start")
        finally:
            if server.poll() is None:
                kill_group(server.pid, signal.SIGKILL)
            server.wait()


# ------------------------------------------------------------------------------------------------ CLI
def _add_cluster_args(p, nodes_required=True):
    p.add_argument("--nodes", type=int, required=nodes_required, default=None if nodes_required else 2)
    p.add_argument("--ranks-per-node", default="1", help="ranks on every node, or one count per node: 2,1")
    p.add_argument("--rails", default="1", help="1 (default), N, or per-rank (one rail per local rank)")
    p.add_argument("--rate", help="tc tbf rate of every inter-node link and direction, e.g. 2gbit")
    p.add_argument("--prefix", help="namespace prefix (default: cfxt + random hex)")
    p.add_argument("--verbose", action="store_true", help="print every ip command")


def _cluster_from(a):
    return Cluster(nodes=a.nodes, ranks_per_node=a.ranks_per_node, rails=a.rails, rate=a.rate, prefix=a.prefix,
                   verbose=a.verbose)


def _measure(a, what):
    src, dst = parse_node(a.src), parse_node(a.dst)
    if a.prefix and owned_netns(a.prefix):  # inside a running cluster (run/up); it stays
        cluster, ctx = Cluster.attach(a.prefix), contextlib.nullcontext()
    else:  # a temporary one
        cluster = Cluster(nodes=max(2, src + 1, dst + 1), rate=a.rate, prefix=a.prefix)
        ctx = cluster
    with ctx:
        measure = cluster.iperf3 if what == "iperf3" else cluster.tcp_rate
        bps = measure(src, dst, seconds=a.seconds)
    print("%s n%d -> n%d: %.3f Gbit/s (%.0f Mbit/s)%s" % (what, src, dst, bps / 1e9, bps / 1e6,
                                                        ", rate limit " + a.rate if a.rate else ""))
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("check", help="exit 0 if namespaces work here, else 77 with the reason")
    p.add_argument("--tc", action="store_true", help="also require tc tbf")
    p.add_argument("--iperf3", action="store_true", help="also require iperf3")
    p = sub.add_parser("run", help="run CMD as every rank of a simulated cluster")
    _add_cluster_args(p)
    p.add_argument("--timeout", type=float, default=300, help="seconds before every rank is killed (rc 124)")
    p.add_argument("--fail-grace", type=float, default=30,
                   help="seconds the other ranks get after one fails (negative: until the timeout)")
    p.add_argument("--env", action="append", default=[], metavar="K=V",
                   help="extra variable for every rank; {node} {rank} {local_rank} {rail} {iface} {addr} expand")
    p.add_argument("command", nargs=argparse.REMAINDER)
    p = sub.add_parser("up", help="create a cluster and hold it until SIGINT/SIGTERM")
    _add_cluster_args(p)
    for name in ("link-down", "link-up"):
        p = sub.add_parser(name, help="take a node's inter-node link(s) %s" % name[5:])
        p.add_argument("--prefix", required=True)
        p.add_argument("node")
        p.add_argument("rail", nargs="?", type=int)
        p.add_argument("--end", choices=("switch", "node"), default="switch")
    for name in ("iperf3", "tcp-rate"):
        p = sub.add_parser(name, help="measure one TCP stream between two nodes")
        p.add_argument("--from", dest="src", default="n0")
        p.add_argument("--to", dest="dst", default="n1")
        p.add_argument("--seconds", type=float, default=3 if name == "iperf3" else 1)
        p.add_argument("--prefix", help="measure inside this running cluster (else a temporary one)")
        p.add_argument("--rate", help="rate limit of the temporary cluster")
    p = sub.add_parser("cleanup", help="delete a crashed run's namespaces")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--prefix", help="the run's prefix")
    g.add_argument("--stale", action="store_true", help="every run whose control file names a dead owner")
    a = ap.parse_args(argv)

    if a.cmd == "cleanup":
        removed = cleanup_stale() if a.stale else cleanup(a.prefix)
        print("netns: removed %s" % (", ".join(removed) if removed else "nothing"))
        return 0
    if a.cmd in ("link-down", "link-up"):
        c = Cluster.attach(a.prefix)
        (c.link_down if a.cmd == "link-down" else c.link_up)(parse_node(a.node), a.rail, a.end)
        return 0

    problem = capability_problem()
    if problem is None and (a.cmd == "check" and a.tc or getattr(a, "rate", None)):
        problem = tc_problem()
    if problem is None and (a.cmd == "iperf3" or a.cmd == "check" and a.iperf3):
        problem = iperf3_problem()
    if problem:
        print("netns: skipped: " + problem, file=sys.stderr if a.cmd != "check" else sys.stdout, flush=True)
        return SKIP_RC
    if a.cmd == "check":
        print("netns: namespaces, veth pairs and bridges work here")
        return 0
    with cleanup_on_signals():
        if a.cmd in ("iperf3", "tcp-rate"):
            return _measure(a, a.cmd)
        with _cluster_from(a) as c:
            print(c.describe(), file=sys.stderr, flush=True)
            if a.cmd == "up":
                print("netns: holding until SIGINT/SIGTERM", file=sys.stderr, flush=True)
                while True:
                    time.sleep(3600)
            cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
            env = dict(kv.split("=", 1) for kv in a.env)
            res = c.run(cmd, timeout=a.timeout, fail_grace=None if a.fail_grace < 0 else a.fail_grace, env=env)
            if res.returncode != 0:
                why = "timeout" if res.first_failure is None else "rank %d failed first" % res.first_failure
                print("netns: exit %d (%s)" % (res.returncode, why), file=sys.stderr, flush=True)
            return res.returncode


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (HarnessError, Unavailable) as e:
        print("netns: error: %s" % e, file=sys.stderr)
        sys.exit(1)
