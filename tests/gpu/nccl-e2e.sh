#!/usr/bin/env bash
# NCCL end to end through the Conflux net plugin, on one GPU: two processes share the GPU with different
# NCCL_HOSTID, so NCCL sees two nodes and sends everything between them through its network transport
# (NCCL_MNNVL_ENABLE=0 keeps multi-node NVLink out). Run once with NCCL_NET_PLUGIN=conflux NCCL_NET=Conflux
# and once with NCCL's own Socket transport (NCCL_NET_PLUGIN=none NCCL_NET=Socket), both over loopback,
# with conflux-perf's nccl backend: every row's result is checked (#wrong), busbw side by side, and NCCL's
# INFO log must say which network it used. The plugin's run also writes Conflux's metrics textfile: the
# plugin's bytes per device and the tuner's decisions must be in it (docs/observability.md).
#
#   tests/gpu/nccl-e2e.sh --bin DIR --lib DIR [--out DIR] [-b 8 -e 256M -f 4]
#     --bin DIR   holds conflux-perf (built with CUDA)
#     --lib DIR   holds libnccl-net-conflux.so (tests/gpu/bundle.sh puts it in lib/)
#   NCCL itself: CONFLUX_PERF_NCCL_LIB, else the nvidia-nccl wheel of python3, else libnccl.so.2.
# Exit 0: both runs right and the plugin in use; 1: a failure; 77: no GPU or no NCCL (nothing measured).
set -uo pipefail
bin=""; lib=""; out="gpu-results/nccl-e2e"; sizes=(-b 8 -e 256M -f 4)
while (($#)); do
  case $1 in
    --bin) bin=$2; shift 2 ;;
    --lib) lib=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -b|-e|-f) sizes+=("$1" "$2"); shift 2 ;;
    *) sed -n 2,14p "$0"; exit 2 ;;
  esac
done
[[ -x $bin/conflux-perf && -f $lib/libnccl-net-conflux.so ]] || { sed -n 2,14p "$0"; exit 2; }
bin=$(cd "$bin" && pwd); lib=$(cd "$lib" && pwd)
mkdir -p "$out"
if [[ -z ${CONFLUX_PERF_NCCL_LIB:-} ]]; then
  wheel=$(python3 -c 'import os, nvidia.nccl as n; print(os.path.join(list(n.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)
  [[ -f $wheel ]] && export CONFLUX_PERF_NCCL_LIB=$wheel
fi

# run NAME VAR=VALUE...: two ranks of conflux-perf's NCCL all-reduce, each its own "node".
run() {
  local name=$1; shift
  local port=$((20000 + RANDOM % 20000)) pids=() rc=0
  for rank in 0 1; do
    env "$@" \
      LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
      CONFLUX_RANK=$rank CONFLUX_NRANKS=2 CONFLUX_LOCAL_RANK=0 CONFLUX_LOCAL_SIZE=1 \
      CONFLUX_BOOTSTRAP_ADDR=127.0.0.1:$port CONFLUX_HOSTID=e2e-node$rank CONFLUX_OFI_ADDR=127.0.0.1 \
      CONFLUX_SOCKET_IFNAME=lo CONFLUX_OFI_DOMAINS=lo CONFLUX_TIMEOUT_MS=60000 \
      NCCL_HOSTID=e2e-node$rank NCCL_MNNVL_ENABLE=0 NCCL_SOCKET_IFNAME=lo \
      NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET \
      timeout 110 "$bin/conflux-perf" allreduce --memory cuda --backend nccl "${sizes[@]}" -n 20 -w 5 \
      >"$out/$name-rank$rank.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  return $rc
}

busbw() { grep -E '^ +[0-9]+ ' "$out/$1-rank0.log" | awk '{print $1, $8}'; }

status=0
run conflux NCCL_NET_PLUGIN=conflux NCCL_NET=Conflux CONFLUX_METRICS_FILE="$out/metrics-rank%r.prom" \
  CONFLUX_METRICS_INTERVAL_MS=200; rc_conflux=$?
if [[ $rc_conflux == 77 ]] || grep -q "skipped: no CUDA device" "$out/conflux-rank0.log"; then
  echo "nccl-e2e: skipped: no CUDA device"; exit 77
fi
if [[ $rc_conflux != 0 ]] && grep -q "cannot load NCCL" "$out/conflux-rank0.log"; then
  grep -m1 "cannot load NCCL" "$out/conflux-rank0.log"; echo "nccl-e2e: skipped: no NCCL library"; exit 77
fi
run socket NCCL_NET_PLUGIN=none NCCL_NET=Socket; rc_socket=$?

grep -q "Using network Conflux" "$out"/conflux-rank*.log || { echo "NCCL did not use the Conflux plugin"; status=1; }
grep -q "Using network Socket" "$out"/socket-rank*.log || { echo "NCCL did not use its Socket transport"; status=1; }
# The plugin's metrics (written every 200 ms; the last file holds the last values): bytes sent per device.
awk '/^conflux_nic_sent_bytes_total\{.*comm="nccl-net"/ && $NF > 0 {found = 1} END {exit !found}' \
  "$out"/metrics-rank0.prom 2>/dev/null || { echo "no plugin bytes in the metrics textfile"; status=1; }
grep -q '^conflux_tuner_decisions_total' "$out"/metrics-rank0.prom 2>/dev/null \
  || echo "note: no tuner decisions in the metrics (NCCL used another tuner)"
for name in conflux socket; do
  rc_var=rc_$name
  if [[ ${!rc_var} != 0 ]]; then
    echo "$name run failed (exit ${!rc_var}):"; tail -n 15 "$out/$name-rank0.log"; status=1
  fi
done
echo "# NCCL all-reduce, 2 processes on one GPU as two nodes, float sum; busbw GB/s (out of place)"
echo "# bytes  conflux-plugin  nccl-socket  ratio"
# Both runs sweep the same sizes in the same order.
paste -d ' ' <(busbw conflux) <(busbw socket) | awk '{r = $4 > 0 ? $2 / $4 : 0; printf "%10s %14s %12s %6.2f\n", $1, $2, $4, r}'
grep -h "Avg bus bandwidth" "$out/conflux-rank0.log" "$out/socket-rank0.log"
exit $status
