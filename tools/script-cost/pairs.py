#!/usr/bin/env python3
"""RESP for `redis-cli --pipe`: SCRIPT LOAD of the plain lock's acquire and release (joined
with their helpers as crates/distlock/src/scripts/mod.rs joins them), then N uncontended
acquire+release pairs on distinct keys, with the arguments `distlock bench` sends (read off
MONITOR). Also the bare lock (MODE bare) and trivial scripts (triv1), for comparison.
CLUSTER=1: for a one-node Redis Cluster, as a `redis-cluster://` client sends them: 64 names
used in turn (so the slots' counters and cached epochs are warm after the first 64 pairs), each
with its slot's counter (the slot tags of keys.rs), and the floor 'cluster:0'.

usage: pairs.py SCRIPTS_DIR N [pair|bare|triv1]"""
import sys, hashlib, os, itertools
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
cluster = os.environ.get('CLUSTER') == '1'
def crc16(b):
    c = 0
    for x in b:
        c ^= x << 8
        for _ in range(8):
            c = ((c << 1) ^ 0x1021) & 0xffff if c & 0x8000 else (c << 1) & 0xffff
    return c
def slot(k): return crc16(k.encode()) % 16384  # the names below carry no braces
def slot_tag(s):
    # keys.rs slot_tag: the first alphanumeric string (shorter first, ASCII order) in slot s.
    alnum = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'
    for n in range(1, 4):
        for t in itertools.product(alnum, repeat=n):
            if slot(''.join(t)) == s: return ''.join(t)
tags = {}
def counter(k):
    if not cluster: return 'distlock:fencing-counter:{6n}'
    s = slot(k)
    if s not in tags: tags[s] = slot_tag(s)
    return 'distlock:fencing-counter:{%s}' % tags[s]
floor = 'cluster:0' if cluster else '0'
for i in range(n):
    k = f"bench:u:{i % 64}" if cluster else f"bench:u:{i}"; o = f"{u}:{2*i+1}"
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
        cmd('EVALSHA', sa, 6, k, counter(k), k, 'redisson_lock_token:{%s}' % k,
            'distlock_lock_queue:{%s}' % k, 'distlock_lock_waiters:{%s}' % k, 30000, o, 'new', 13000,
            floor, 'distlock;vm;7137', 'fifo', f'5000;5000;{u}')
    if new and mode == 'pair':
        cmd('EVALSHA', sr, 7, k, 'redisson_lock__channel:{%s}' % k, 'redisson_unlock_latch:{%s}:%s:r%d' % (k, u, 2*i+2),
            counter(k), 'redisson_lock_token:{%s}' % k, 'distlock_lock_queue:{%s}' % k,
            'distlock_lock_waiters:{%s}' % k, 30000, o, 13000, floor, '')
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
