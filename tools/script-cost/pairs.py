#!/usr/bin/env python3
"""RESP for `redis-cli --pipe`: SCRIPT LOAD of the plain lock's acquire and release (joined
with their helpers as crates/distlock/src/scripts/mod.rs joins them), then N uncontended
acquire+release pairs on distinct keys, with the arguments `distlock bench` sends (read off
MONITOR). Also the bare lock (MODE bare) and trivial scripts (triv1), for comparison.

usage: pairs.py SCRIPTS_DIR N [pair|bare|triv1]"""
import sys, hashlib
src = sys.argv[1]; n = int(sys.argv[2]); mode = sys.argv[3] if len(sys.argv) > 3 else 'pair'
def rd(f): return open(f"{src}/{f}").read()
acq = rd('publish.lua') + rd('prelude.lua') + rd('handoff.lua') + rd('lock_acquire.lua')
rel = rd('publish.lua') + rd('prelude.lua') + rd('handoff.lua') + rd('lock_release.lua')
out = sys.stdout.buffer
def cmd(*a):
    b = [x if isinstance(x, bytes) else str(x).encode() for x in a]
    out.write(b"*%d\r\n" % len(b))
    for x in b: out.write(b"$%d\r\n%s\r\n" % (len(x), x))
sa = hashlib.sha1(acq.encode()).hexdigest(); sr = hashlib.sha1(rel.encode()).hexdigest()
cmd('SCRIPT', 'LOAD', acq); cmd('SCRIPT', 'LOAD', rel)
bare = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"
sb = hashlib.sha1(bare.encode()).hexdigest(); cmd('SCRIPT', 'LOAD', bare)
st = hashlib.sha1(b'return 1').hexdigest(); cmd('SCRIPT', 'LOAD', 'return 1')
u = 'ae901363-43c5-4ff7-b666-e3c16e6aa114'
for i in range(n):
    k = f"bench:u:{i}"; o = f"{u}:{2*i+1}"
    if mode == 'triv1':
        cmd('EVALSHA', st, 1, k, o); cmd('EVALSHA', st, 1, k, o)
        continue
    if mode == 'bare':
        cmd('SET', k, o, 'NX', 'PX', 30000)
        cmd('EVALSHA', sb, 1, k, o)
        continue
    # Scripts older than the argument cut (their acquire takes ARGV[11]) get their old arguments.
    new = 'ARGV[11]' not in rd('lock_acquire.lua')
    if new and mode in ('pair', 'acq'):
        cmd('EVALSHA', sa, 6, k, 'distlock:fencing-counter:{6n}', k, 'redisson_lock_token:{%s}' % k,
            'distlock_lock_queue:{%s}' % k, 'distlock_lock_waiters:{%s}' % k, 30000, o, 'new', 13000,
            '0', 'distlock;vm;7137', 'fifo', f'5000;5000;{u}')
    if new and mode == 'pair':
        cmd('EVALSHA', sr, 7, k, 'redisson_lock__channel:{%s}' % k, 'redisson_unlock_latch:{%s}:%s:r%d' % (k, u, 2*i+2),
            'distlock:fencing-counter:{6n}', 'redisson_lock_token:{%s}' % k, 'distlock_lock_queue:{%s}' % k,
            'distlock_lock_waiters:{%s}' % k, 30000, o, 13000, '0', '')
    if new: continue
    if mode in ('pair', 'acq'):
        cmd('EVALSHA', sa, 6, k, 'distlock:fencing-counter:{6n}', k, 'redisson_lock_token:{%s}' % k,
            'distlock_lock_queue:{%s}' % k, 'distlock_lock_waiters:{%s}' % k, 30000, o, 'new', 13000,
            'distlock:fencing-token', '0', 'distlock:holder', 'distlock;vm;7137', 'fifo',
            f'5000;5000;{u}', 'distlock_lock_grant:{%s}' % k)
    if mode == 'pair':
        cmd('EVALSHA', sr, 7, k, 'redisson_lock__channel:{%s}' % k, 'redisson_unlock_latch:{%s}:%s:r%d' % (k, u, 2*i+2),
            'distlock:fencing-counter:{6n}', 'redisson_lock_token:{%s}' % k, 'distlock_lock_queue:{%s}' % k,
            'distlock_lock_waiters:{%s}' % k, '0', 30000, o, 13000, '0', 'distlock_lock_grant:{%s}' % k, '')
