"""Open MPI across simulated nodes: mpirun in node 0's namespace, one orted per other node started in its
namespace by netns_rsh_agent.sh (Open MPI's rsh launcher with our agent instead of ssh).

  with Cluster(nodes=2, ranks_per_node=1) as c:
      p = run_mpi(c, ["./prog", "--flag"], timeout=300)       # CompletedProcess, text output

Every simulated node gets its own UTS namespace and hostname node<i> (node 0's mpirun too), so Open MPI
treats the namespaces as separate hosts: shared memory (vader) only between ranks of one node, tcp between
nodes, restricted to the cluster's rail interfaces. Ranks are numbered like the harness's (by node, then
local rank) and, with pin, pinned to core rank % cores like `conflux-perf --pin`. Open MPI refuses to run as
root unless told; the launch sets OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM) for its own processes only.
"""
import os
import shlex
import shutil

AGENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "netns_rsh_agent.sh")


def mpi_problem():
    """Why Open MPI cannot be launched here (None when it can)."""
    if not shutil.which("mpirun"):
        return "mpirun is not installed (apt-get install openmpi-bin)"
    if not shutil.which("unshare"):
        return "unshare (util-linux) is not installed"
    return None


def mpirun_args(cluster, cmd, pin=True, mca=None):
    """The command line that runs @p cmd as every rank of @p cluster under Open MPI; run it inside node 0
    (cluster.run_in(0, ...)). @p mca adds --mca settings (dict)."""
    hosts = ",".join("%s:%d" % (cluster.addr(n, 0), cluster.node_ranks[n]) for n in range(cluster.nodes))
    ifaces = ",".join(cluster.iface(r) for r in range(cluster.rails))
    settings = {
        "plm_rsh_agent": AGENT,
        "oob_tcp_if_include": cluster.iface(0),
        "btl_tcp_if_include": ifaces,
        "pml": "ob1",
        "btl": "tcp,vader,self",
    }
    settings.update(mca or {})
    args = ["mpirun", "-np", str(cluster.total_ranks()), "--host", hosts,
            "--map-by", "slot", "--bind-to", "none",
            "-x", "NETNS_CLUSTER_PREFIX"]
    for k, v in settings.items():
        args += ["--mca", k, v]
    if pin:
        # Rank r on core r % cores, as the harness's jobs pin theirs (orted binding is per host).
        cores = os.cpu_count() or 1
        line = 'exec taskset -c $((OMPI_COMM_WORLD_RANK %% %d)) "$@"' % cores
        args += ["sh", "-c", line, "sh"]
    args += list(cmd)
    # mpirun itself runs as host node0 in node 0's namespace.
    return ["unshare", "--uts", "sh", "-c", 'hostname node0 && exec "$@"', "sh"] + args


def run_mpi(cluster, cmd, timeout=300, pin=True, mca=None):
    """Runs @p cmd under mpirun across @p cluster; returns the CompletedProcess (stdout and stderr text)."""
    env_cmd = ["env", "NETNS_CLUSTER_PREFIX=" + cluster.prefix, "OMPI_ALLOW_RUN_AS_ROOT=1",
               "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1", "OMPI_MCA_plm_rsh_assume_same_shell=1"]
    return cluster.run_in(0, env_cmd + mpirun_args(cluster, cmd, pin=pin, mca=mca), timeout=timeout)


def describe(cluster, cmd, pin=True, mca=None):
    """The launch as one shell line, for reports."""
    args = [os.path.relpath(a) if a == AGENT else a for a in mpirun_args(cluster, cmd, pin=pin, mca=mca)]
    return "ip netns exec %s %s" % (cluster.node_ns(0), shlex.join(args))
