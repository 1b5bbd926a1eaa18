#!/bin/bash
# Instructions redis-server executes per call of one script body (bodies.py: Redisson's, the
# bare commands a distlock script keeps its guarantee with, the distlock script), each sent
# by FCALL one at a time against the same data, counted by callgrind as prims.sh counts: the
# difference of runs with N2 and N1 calls, over N2 - N1. What a distlock script costs above
# its commands is its own logic; what its commands cost above Redisson's body is the guarantee.
#
# usage: tools/script-cost/bodies.sh [BODY ...]   (default: every body of bodies.py)
#   N1, N2   the two counts (default 200 and 600)
# Needs redis-server 7+ (Redis Functions), redis-cli, valgrind and python3.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
N1=${N1:-200}; N2=${N2:-600}
source "$HERE/callgrind.sh"
# per_pair's feed: feed BODY N PORT.
feed() {
  python3 "$HERE/bodies.py" "$1" "$2" "$3" > $T/run.log
  grep -q "^errors: 0" $T/run.log || { echo "$1: $(cat $T/run.log)" >&2; exit 1; }
}
for b in ${@:-$(python3 "$HERE/bodies.py")}; do
  per_pair $N1 $N2 feed $b
  echo "$b: $PER instructions per call"
done
