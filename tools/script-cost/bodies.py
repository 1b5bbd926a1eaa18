#!/usr/bin/env python3
"""What one call of a script body costs the server, the body alone: N calls of one body of
BODIES below, each registered as a function of a library of its own (FUNCTION LOAD) and called
with FCALL one at a time (each reply read before the next), against the same data. The rows
set Redisson's body, the bare commands a distlock script cannot do without, and the distlock
script itself side by side, so that what a script costs above its commands is its own logic,
and what its commands cost above Redisson's is the guarantee they keep (bodies.sh counts them).

A distlock script is loaded as the library loads it (scripts.py): the helpers a library defines
once come before the functions, the rest of its helpers stay in its body.

usage: bodies.py BODY N PORT    (BODY: a key of BODIES; prints `errors: N` at the end)
       bodies.py               (the keys of BODIES, one a line)"""
import sys

import scripts
from resp import Conn


OWNER = 'ae901363-43c5-4ff7-b666-e3c16e6aa114:1'
CLIENT = 'fb4f16be-5fca-43f0-8fd3-a5bf4daa868e'
# A plain lock's hash as distlock's fast acquire writes it: the owner's hold count, the
# fencing token, the holder.
HELD = [('HSET', 'cost:extend', OWNER, 1, 'distlock:fencing-token', 123456789,
         'distlock:holder', 'app;host;1234;1795984157'), ('PEXPIRE', 'cost:extend', 3000000)]
RENEW_KEYS, RENEW_ARGS = ['cost:extend'], [30000, OWNER]
# A latch counted down once per call, its count never reaching zero; distlock's record set
# is the block of 64 count-downs the call's number falls in, as the client numbers them.
COUNT = [('SET', 'cost', 1000000)]
def latch_keys(i):
    return ['cost', f'distlock_latch_count_downs:{{cost}}:{CLIENT}:0:{i // 64}']
def latch_args(i):
    return [39000, i % 64 + 1]

# BODY: (Lua body, setup commands, KEYS (a list, or a function of the call's number), ARGV).
BODIES = {
    # Redisson's watchdog renewal (renewExpirationAsync).
    'renew-redisson': ("if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then "
                       "redis.call('pexpire', KEYS[1], ARGV[1]) return 1 end return 0",
                       HELD, RENEW_KEYS, RENEW_ARGS),
    # The commands of a renewal that checks the hash's kind: the owner's field and the mode
    # field in one HMGET, then PEXPIRE.
    'renew-commands': ("local h = redis.call('hmget', KEYS[1], ARGV[2], 'mode') "
                       "if h[1] and not h[2] then redis.call('pexpire', KEYS[1], ARGV[1]) "
                       "return 1 end return 0", HELD, RENEW_KEYS, RENEW_ARGS),
    'renew-distlock': (scripts.own_part('lock_renew_one.lua'), HELD, RENEW_KEYS, RENEW_ARGS),
    # Not distlock's: a renewal that knows its grant by the fencing token alone (one HGET,
    # no kind check), for comparison.
    'renew-token': ("if redis.call('hget', KEYS[1], 'distlock:fencing-token') == ARGV[3] then "
                    "redis.call('pexpire', KEYS[1], ARGV[1]) return 1 end return 0",
                    HELD, RENEW_KEYS, RENEW_ARGS + ['123456789']),
    # RCountDownLatch.countDown.
    'latch-redisson': ("local v = redis.call('decr', KEYS[1]) if v <= 0 then "
                       "redis.call('del', KEYS[1]) end if v == 0 then "
                       "redis.call(ARGV[2], KEYS[2], ARGV[1]) end",
                       COUNT, ['cost', 'redisson_countdownlatch__channel__{cost}'], [0, 'publish']),
    # The commands of a count-down with its record: DECR, the record's SADD claim (and its
    # TTL when the claim made the set).
    'latch-commands': ("local v = redis.call('decr', KEYS[1]) local a = redis.call('sadd', "
                       "KEYS[2], '0', ARGV[2], -(v * 64 + ARGV[2])) if a == 3 then "
                       "redis.call('pexpire', KEYS[2], ARGV[1]) end return v",
                       COUNT, latch_keys, latch_args),
    'latch-distlock': (scripts.own_part('latch_count_down.lua'), COUNT, latch_keys, latch_args),
}

def main():
    if len(sys.argv) == 1:
        print('\n'.join(BODIES))
        return
    body, n, port = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    conn = Conn(port, show_errors=True)
    cmd = conn.cmd
    code, setup, keys, args = BODIES[body]
    helpers = ''.join(scripts.read(h) for h in scripts.shared())
    cmd('FUNCTION', 'LOAD', 'REPLACE', f'#!lua name=bodies\n{helpers}\n'
        f"redis.register_function('body', function(KEYS, ARGV)\n{code}\nend)\n")
    for c in setup:
        cmd(*c)
    for i in range(-1, n):
        k = keys(i + 1) if callable(keys) else keys
        a = args(i + 1) if callable(args) else args
        cmd('FCALL', 'body', len(k), *k, *a)
    print(f'errors: {conn.errors}')

main()
