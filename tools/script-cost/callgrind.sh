# callgrind.sh: how ir.sh and prims.sh count what redis-server executes. Sourced, not run.
# Needs redis-server, redis-cli and valgrind; sets T (a scratch directory, removed on exit).
#
# total FEED ARGS...   start redis-server under valgrind's callgrind on a port of its own
#                      (CLUSTER=1: a one-node Redis Cluster with every slot, config epoch 1),
#                      run `FEED ARGS... PORT` against it, stop it, print its instruction
#                      total
# per_pair N1 N2 FEED ARGS...
#                      the instructions of one pair: the totals of `FEED ARGS... N2 PORT` and
#                      `FEED ARGS... N1 PORT` apart, over N2 - N1 (start-up and warm-up cancel);
#                      sets PER (per pair), TOTAL1 and TOTAL2. Run it in the script's own shell
#                      (not in $(...)), so that a failing run stops the script under set -e.
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT

total() {
  local port=$((7300 + RANDOM % 500))
  local cl=()
  [ "${CLUSTER:-}" = 1 ] && cl=(--cluster-enabled yes --cluster-config-file $T/nodes-$port.conf)
  valgrind --tool=callgrind --callgrind-out-file=$T/cg.out redis-server --port $port --save '' --appendonly no "${cl[@]}" > $T/cg.log 2>&1 &
  local vp=$!
  for i in $(seq 100); do redis-cli -p $port ping >/dev/null 2>&1 && break; sleep 0.2; done
  if [ "${CLUSTER:-}" = 1 ]; then
    redis-cli -p $port cluster addslotsrange 0 16383 >/dev/null; redis-cli -p $port cluster bumpepoch >/dev/null
    for i in $(seq 100); do redis-cli -p $port cluster info | grep -q cluster_state:ok && break; sleep 0.2; done
  fi
  "$@" $port
  redis-cli -p $port shutdown nosave >/dev/null 2>&1; wait $vp
  grep -m1 "^summary\|^totals" $T/cg.out | awk '{print $2}'
}

per_pair() {
  local n1=$1 n2=$2; shift 2
  TOTAL1=$(total "$@" $n1); TOTAL2=$(total "$@" $n2)
  PER=$(( (TOTAL2 - TOTAL1) / (n2 - n1) ))
}
