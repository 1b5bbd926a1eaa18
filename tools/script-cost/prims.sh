#!/bin/bash
# Instructions redis-server executes per uncontended operation pair of each primitive, as a
# distlock client sends them (crates/distlock/examples/cost_pairs.rs), counted by valgrind's
# callgrind as ir.sh counts: the difference of runs with N2 and N1 pairs, over N2 - N1 (the
# client's start-up and warm-up pair cancel).
#
# usage: tools/script-cost/prims.sh [PRIMITIVE ...]   (default: all of cost_pairs.rs's)
#   redisson:PRIMITIVE  the same pairs as Redisson sends them (redisson.py)
#   N1, N2   the two counts (default 200 and 600)
# Needs redis-server, redis-cli, valgrind and a release build of the example
# (cargo build --release --example cost_pairs, which this runs first).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$HERE/../..
N1=${N1:-200}; N2=${N2:-600}
BIN=$ROOT/target/release/examples/cost_pairs
(cd "$ROOT" && cargo build -q --release --example cost_pairs)
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
run() {
  local port=$((7300 + RANDOM % 500))
  valgrind --tool=callgrind --callgrind-out-file=$T/cg.out redis-server --port $port --save '' --appendonly no > $T/cg.log 2>&1 &
  local vp=$!
  for i in $(seq 100); do redis-cli -p $port ping >/dev/null 2>&1 && break; sleep 0.2; done
  case $1 in
    redisson:*) python3 "$HERE/redisson.py" "${1#redisson:}" "$2" | redis-cli -p $port --pipe > $T/run.log ;;
    *) "$BIN" redis://127.0.0.1:$port/ "$1" "$2" > $T/run.log ;;
  esac
  grep -q "errors: [1-9]" $T/run.log && { echo "$1: errors: $(cat $T/run.log)" >&2; exit 1; }
  redis-cli -p $port shutdown nosave >/dev/null 2>&1; wait $vp
  grep -m1 "^summary\|^totals" $T/cg.out | awk '{print $2}'
}
for p in ${@:-lock fair read write semaphore leased latch job extend}; do
  a=$(run $p $N1); b=$(run $p $N2)
  echo "$p: $(( (b - a) / (N2 - N1) )) instructions per pair"
done
