#!/bin/bash
# Instructions redis-server executes per uncontended acquire+release pair of the plain lock's
# scripts, counted by valgrind's callgrind (repeatable, unlike timings on a shared machine):
# the difference of the totals of runs with N2 and N1 pairs, over N2 - N1 (start-up cancels).
#
# usage: tools/script-cost/ir.sh [SCRIPTS_DIR [N1 N2]]
#   SCRIPTS_DIR  the .lua files to measure (default: the library's), e.g. a modified copy
#   MODE=pair    the plain lock's acquire + release as a client sends them (default: the fast
#                paths, lock_acquire_fast.lua and lock_release_fast.lua); full: the full
#                scripts, lock_acquire.lua and lock_release.lua; bare: SET NX PX + a
#                compare-and-delete script (the bare lock); triv1: two `return 1` scripts;
#                coalesced<B>: B acquires per EVALSHA of a wrapper, then B releases; fcall:
#                the two scripts as a Redis Functions library (see pairs.py)
#   CLUSTER=1    a one-node Redis Cluster (all slots, config epoch 1), as pairs.py says
# Needs redis-server, redis-cli, valgrind and python3.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
S=${1:-$HERE/../../crates/distlock/src/scripts}; N1=${2:-1000}; N2=${3:-3000}; MODE=${MODE:-pair}
source "$HERE/callgrind.sh"
# per_pair's feed: feed N PORT.
feed() { python3 $HERE/pairs.py $S $1 $MODE | redis-cli -p $2 --pipe > $T/pipe.log 2>&1; }
per_pair $N1 $N2 feed
echo "instructions per pair: $PER  (N=$N1: $TOTAL1, N=$N2: $TOTAL2)"; tail -1 $T/pipe.log
