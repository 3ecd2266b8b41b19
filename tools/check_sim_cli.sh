#!/usr/bin/env bash
# conflux-sim's command line: a projection on a fixture prints a row per node count and a choice (with the
# chunk the model chose for a hierarchical one); every
# refused flag exits 2 with a message that names it. Usage: check_sim_cli.sh CONFLUX_SIM FIXTURE.json
set -u
sim=$1 topo=$2 failed=0
out=$("$sim" project --topo "$topo" --nodes 1,2,4 --bytes 64M 2>&1)
rows=$(printf '%s\n' "$out" | grep -cE '^ +[124] +[0-9]+ .* [a-z_]+( \([0-9]+ [KM]iB\))?$')
if [ "$rows" -ne 3 ]; then echo "FAIL: expected 3 projection rows, got $rows:"; echo "$out"; failed=1; fi
refuse() {  # refuse NEEDLE ARGS...: exit status 2 and NEEDLE in the message
  local needle=$1; shift
  local msg; msg=$("$sim" "$@" 2>&1); local rc=$?
  if [ $rc -ne 2 ] || ! printf '%s' "$msg" | grep -qF -- "$needle"; then
    echo "FAIL: conflux-sim $* -> exit $rc, wanted 2 and '$needle' in: $msg"; failed=1
  fi
}
refuse "--bytes: '12X'" project --topo "$topo" --bytes 12X
refuse "--nodes: '1,,2'" project --topo "$topo" --nodes 1,,2
refuse "--bytes needs a value" project --topo "$topo" --bytes
refuse "unknown flag --frob" project --topo "$topo" --frob
refuse "--coll: 'nope'" project --topo "$topo" --coll nope
refuse "--ranks-per-node: '0'" project --topo "$topo" --ranks-per-node 0
refuse "--intra-gbytes: '-3'" project --topo "$topo" --intra-gbytes -3
refuse "unexpected argument 'extra'" project --topo "$topo" extra
refuse "--topo FILE.json is required" project
refuse "usage: conflux-sim project" simulate
# predict: every candidate's time from a cost file, the selector's choice first; bad input names its flag.
cost=$(mktemp)
trap 'rm -f "$cost"' EXIT
printf 'inter_alpha_us=12\ninter_gbytes_per_s=0.25\nnics_per_node=1\n' > "$cost"
out=$("$sim" predict --cost-file "$cost" --nodes 2 --ranks-per-node 2 --bytes 64K,256M --chunk auto --json 2>&1)
rows=$(printf '%s\n' "$out" | grep -cE '^\{"bytes": [0-9]+, "choice": "[a-z_]+", "predicted_us": \{"[a-z_]+": [0-9.e+]+(, "[a-z_]+": [0-9.e+]+){5,}\}, "chunk_bytes": \{"hier[a-z_]*": [0-9]+(, "hier[a-z_]*": [0-9]+){2}\}\}$')
if [ "$rows" -ne 2 ]; then echo "FAIL: expected 2 prediction rows with every candidate, got $rows:"; echo "$out"; failed=1; fi
if ! printf '%s\n' "$out" | grep -q '"bytes": 268435456, "choice": "hier"'; then
  echo "FAIL: 256 MiB on 2 x 2 ranks over one slow link should choose hier:"; echo "$out"; failed=1
fi
# Without --chunk auto (a fixed chunk, the default) no algorithm has one chosen.
fixed=$("$sim" predict --cost-file "$cost" --nodes 2 --ranks-per-node 2 --bytes 256M --json 2>&1)
if ! printf '%s\n' "$fixed" | grep -q '"chunk_bytes": {}}$'; then
  echo "FAIL: a fixed chunk should leave chunk_bytes empty:"; echo "$fixed"; failed=1
fi
# --radix and --extra-message reach the model: on 8 nodes, rhd of radix 8 is one round of 7 messages
# against radix 2's three rounds, faster when their latencies overlap (0) and slower when they queue (1).
rhd_us() { "$sim" predict --cost-file "$cost" --nodes 8 --ranks-per-node 1 --bytes 64K --json "$@" 2>&1 |
  grep -oE '"rhd": [0-9.e+]+' | cut -d' ' -f2; }
r2=$(rhd_us); r8_overlap=$(rhd_us --radix 8 --extra-message 0); r8_queued=$(rhd_us --radix 8 --extra-message 1)
if ! awk -v a="$r2" -v b="$r8_overlap" -v c="$r8_queued" 'BEGIN { exit !(a > 0 && b > 0 && b < a && c > a) }'; then
  echo "FAIL: rhd at 64K on 8 nodes: radix 2 $r2 us, radix 8 overlapped $r8_overlap us (should be less), queued $r8_queued us (should be more)"
  failed=1
fi
# --radix auto: the model picks rhd's radix, and the JSON names it.
auto_out=$("$sim" predict --cost-file "$cost" --nodes 8 --ranks-per-node 1 --bytes 64K --json --radix auto --extra-message 0 2>&1)
if ! printf '%s\n' "$auto_out" | grep -qE '"radix": \{[^}]*"rhd": 8'; then
  echo "FAIL: predict --radix auto with free extra messages should choose radix 8 for rhd on 8 nodes:"; echo "$auto_out"; failed=1
fi
refuse "--radix: '65'" predict --cost-file "$cost" --nodes 2 --ranks-per-node 2 --radix 65
refuse "--extra-message: '2'" predict --cost-file "$cost" --nodes 2 --ranks-per-node 2 --extra-message 2
refuse "--chunk: 'x'" predict --cost-file "$cost" --nodes 2 --ranks-per-node 2 --chunk x
refuse "--nodes: '1'" predict --cost-file "$cost" --nodes 1 --ranks-per-node 2
refuse "ranks is more than" predict --cost-file "$cost" --nodes 1048576 --ranks-per-node 8
refuse "ranks is more than" project --topo "$topo" --nodes 262144
refuse "--bytes: '1M,x'" predict --cost-file "$cost" --nodes 2 --ranks-per-node 2 --bytes 1M,x
refuse "predict needs --cost-file" predict --nodes 2 --ranks-per-node 2
refuse "unknown flag --frob" predict --cost-file "$cost" --nodes 2 --ranks-per-node 2 --frob
msg=$("$sim" predict --cost-file "$cost.missing" --nodes 2 --ranks-per-node 2 2>&1); rc=$?
if [ $rc -ne 1 ] || ! printf '%s' "$msg" | grep -qF "$cost.missing"; then
  echo "FAIL: a missing cost file -> exit $rc, wanted 1 and its name in: $msg"; failed=1
fi
[ $failed -eq 0 ] && echo "conflux-sim command line: ok"
exit $failed
