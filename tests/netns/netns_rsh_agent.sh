#!/bin/sh
# Open MPI's remote-shell agent for simulated nodes (plm_rsh_agent; see netns_mpi.py and docs/netns.md).
# mpirun runs `netns_rsh_agent.sh HOST orted ARGS...` where ssh would run; HOST is a node's rail-0 address,
# 10.200.0.<node + 1>. The daemon starts inside that node's namespace (<NETNS_CLUSTER_PREFIX>-n<node>) with
# its own UTS namespace and hostname node<node>, so that Open MPI sees separate hosts and never uses shared
# memory between simulated nodes. Like ssh, the words after HOST form one shell command line.
set -eu
[ $# -ge 2 ] || { echo "netns_rsh_agent.sh: usage: HOST COMMAND..." >&2; exit 2; }
host=$1
shift
prefix=${NETNS_CLUSTER_PREFIX:?netns_rsh_agent.sh: NETNS_CLUSTER_PREFIX is not set}
case $host in
  10.200.0.*) octet=${host#10.200.0.} ;;
  *) echo "netns_rsh_agent.sh: $host is not a simulated node's rail-0 address (10.200.0.N)" >&2; exit 2 ;;
esac
case $octet in
  ''|*[!0-9]*) echo "netns_rsh_agent.sh: bad host $host" >&2; exit 2 ;;
esac
node=$((octet - 1))
exec ip netns exec "$prefix-n$node" unshare --uts sh -c 'hostname "$1" && exec sh -c "$2"' sh "node$node" "$*"
