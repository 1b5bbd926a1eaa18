#!/bin/bash
# Instructions redis-server executes per uncontended operation pair of each primitive, as a
# distlock client sends them (crates/distlock/examples/cost_pairs.rs), counted by valgrind's
# callgrind as ir.sh counts: the difference of runs with N2 and N1 pairs, over N2 - N1 (the
# client's start-up and warm-up pair cancel).
#
# usage: tools/script-cost/prims.sh [PRIMITIVE ...]   (default: all of cost_pairs.rs's)
#   redisson:PRIMITIVE  the same pairs as Redisson sends them (redisson.py), one command at a
#                       time as cost_pairs sends distlock's (each reply read before the next)
#   N1, N2   the two counts (default 200 and 600)
#   CLUSTER=1  a one-node Redis Cluster (every slot, config epoch 1), joined as a Cluster
#              (redis-cluster://); Redisson's pairs are sent to it as to a standalone server
# Needs redis-server, redis-cli, valgrind and a release build of the example
# (cargo build --release --example cost_pairs, which this runs first).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$HERE/../..
N1=${N1:-200}; N2=${N2:-600}
BIN=$ROOT/target/release/examples/cost_pairs
# CLUSTER=1 (callgrind.sh): a one-node Redis Cluster, which the client joins as a Cluster.
SCHEME=redis; [ "${CLUSTER:-}" = 1 ] && SCHEME=redis-cluster
(cd "$ROOT" && cargo build -q --release --example cost_pairs)
source "$HERE/callgrind.sh"
# per_pair's feed: feed PRIMITIVE N PORT.
feed() {
  case $1 in
    redisson:*) python3 "$HERE/redisson.py" "${1#redisson:}" "$2" "$3" > $T/run.log ;;
    *) "$BIN" $SCHEME://127.0.0.1:$3/ "$1" "$2" > $T/run.log ;;
  esac
  if grep -q "errors: [1-9]" $T/run.log; then echo "$1: $(cat $T/run.log)" >&2; exit 1; fi
}
for p in ${@:-lock fair read write semaphore leased latch job extend bare}; do
  per_pair $N1 $N2 feed $p
  echo "$p: $PER instructions per pair"
done
