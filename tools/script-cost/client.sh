#!/bin/bash
# Instructions the client process executes per uncontended operation pair (the client's own
# work: building the request, redis-rs's encoding and parsing, tokio, distlock's bookkeeping),
# counted by valgrind's callgrind on crates/distlock/examples/cost_pairs.rs against a plain
# redis-server: the difference of runs with N2 and N1 pairs, over N2 - N1 (start-up, connect
# and warm-up cancel), as prims.sh counts the server.
#
# usage: tools/script-cost/client.sh [PRIMITIVE ...]   (default: lock bare)
#   N1, N2   the two counts (default 200 and 600)
# Needs redis-server, redis-cli and valgrind; builds the example in release mode first.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$HERE/../..
N1=${N1:-200}; N2=${N2:-600}
BIN=$ROOT/target/release/examples/cost_pairs
(cd "$ROOT" && cargo build -q --release --example cost_pairs)
T=$(mktemp -d); trap 'redis-cli -p $PORT shutdown nosave >/dev/null 2>&1 || true; rm -rf "$T"' EXIT
PORT=$((7800 + RANDOM % 100))
redis-server --port $PORT --save '' --appendonly no > $T/server.log 2>&1 &
for i in $(seq 100); do redis-cli -p $PORT ping >/dev/null 2>&1 && break; sleep 0.1; done
count() {
  valgrind --tool=callgrind --callgrind-out-file=$T/cg.out "$BIN" redis://127.0.0.1:$PORT/ "$1" "$2" > $T/run.log 2>&1
  grep -q "^done $2" $T/run.log || { cat $T/run.log >&2; exit 1; }
  grep -m1 "^summary\|^totals" $T/cg.out | awk '{print $2}'
}
for p in ${@:-lock bare}; do
  a=$(count $p $N1); b=$(count $p $N2)
  echo "$p: $(( (b - a) / (N2 - N1) )) client instructions per pair"
done
