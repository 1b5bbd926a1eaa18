#!/usr/bin/env python3
"""RESP for `redis-cli --pipe`: SCRIPT LOAD of the plain lock's acquire and release (joined
with the helpers crates/distlock/src/scripts/mod.rs names for them, read from that file), then N uncontended
acquire+release pairs on distinct keys, with the arguments `distlock-bench bench` sends (read off
MONITOR). Also the bare lock (MODE bare) and trivial scripts (triv1), for comparison, and two ways of running the same
scripts that were measured and not adopted (doc/performance.md, "Coalescing and Redis
Functions, measured"): coalesced<B>, B acquires in one EVALSHA of a wrapper that runs each as a
function of its own KEYS and ARGV, then B releases the same way; fcall, both scripts as one
Redis Functions library (FUNCTION LOAD once, then FCALL), the helpers created once at load.
CLUSTER=1: for a one-node Redis Cluster, as a `redis-cluster://` client sends them: 64 names
used in turn (so the slots' counters and cached epochs are warm after the first 64 pairs), each
with its slot's counter (the slot tags of keys.rs), and the floor 'cluster:0'.

MODE pair sends what a client sends for an uncontended pair: the fast paths
(lock_acquire_fast.lua, lock_release_fast.lua) where the scripts have them; full sends the
full scripts.

usage: pairs.py SCRIPTS_DIR N [pair|full|bare|triv1|coalesced<B>|fcall]"""
import sys, hashlib, os, itertools
import scripts
from resp import encode
src = sys.argv[1]; n = int(sys.argv[2]); mode = sys.argv[3] if len(sys.argv) > 3 else 'pair'
def rd(f): return scripts.read(f, src)
def joined(f): return scripts.joined(f, src)
acq = joined('lock_acquire.lua')
rel = joined('lock_release.lua')
out = sys.stdout.buffer
def cmd(*a): out.write(encode(*a))
sa = hashlib.sha1(acq.encode()).hexdigest(); sr = hashlib.sha1(rel.encode()).hexdigest()
cmd('SCRIPT', 'LOAD', acq); cmd('SCRIPT', 'LOAD', rel)
bare = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"
sb = hashlib.sha1(bare.encode()).hexdigest(); cmd('SCRIPT', 'LOAD', bare)
st = hashlib.sha1(b'return 1').hexdigest(); cmd('SCRIPT', 'LOAD', 'return 1')
fast = os.path.exists(f"{src}/lock_acquire_fast.lua")
if fast:
    fa = joined('lock_acquire_fast.lua'); fr = joined('lock_release_fast.lua')
    sfa = hashlib.sha1(fa.encode()).hexdigest(); sfr = hashlib.sha1(fr.encode()).hexdigest()
    cmd('SCRIPT', 'LOAD', fa); cmd('SCRIPT', 'LOAD', fr)
    cmd('SET', 'distlock:fencing-counter:{6n}', '1')
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
def acq_call(k, o):
    return ([k, counter(k), k, 'redisson_lock_token:{%s}' % k, 'distlock_lock_queue:{%s}' % k,
             'distlock_lock_waiters:{%s}' % k],
            [30000, o, 'new', 13000, floor, 'distlock;vm;7137', 'fifo', f'5000;5000;{u}'])
def rel_call(k, o, i):
    return ([k, 'redisson_lock__channel:{%s}' % k, 'redisson_unlock_latch:{%s}:%s:r%d' % (k, u, 2*i+2),
             counter(k), 'redisson_lock_token:{%s}' % k, 'distlock_lock_queue:{%s}' % k,
             'distlock_lock_waiters:{%s}' % k], [30000, o, 13000, floor, ''])
helpers = rd('publish.lua') + rd('prelude.lua') + rd('handoff.lua')
if mode.startswith('coalesced'):
    # ARGV: the call count c, then (script 1|2, #keys, #args) per call, then every call's
    # arguments; KEYS: every call's keys. Each call runs under pcall; the reply is
    # {{1, reply} | {0, error}, ...}.
    b = int(mode[len('coalesced'):])
    wrap = helpers + "local function acquire(KEYS, ARGV)\n" + rd('lock_acquire.lua') + \
        "\nend\nlocal function release(KEYS, ARGV)\n" + rd('lock_release.lua') + """
end
local fns = {acquire, release}
local c = tonumber(ARGV[1])
local out = {}
local ki, ai = 0, 1 + 3 * c
for i = 1, c do
  local f, nk, na = fns[tonumber(ARGV[3*i-1])], tonumber(ARGV[3*i]), tonumber(ARGV[3*i+1])
  local ok, r = pcall(f, {unpack(KEYS, ki + 1, ki + nk)}, {unpack(ARGV, ai + 1, ai + na)})
  ki, ai = ki + nk, ai + na
  if not ok then out[i] = {0, type(r) == 'table' and r.err or tostring(r)}
  elseif type(r) == 'table' and r.err then out[i] = {0, r.err}
  else out[i] = {1, r} end
end
return out
"""
    sw = hashlib.sha1(wrap.encode()).hexdigest(); cmd('SCRIPT', 'LOAD', wrap)
    def send(which, calls):
        hdr, ks, args = [len(calls)], [], []
        for keys, a in calls:
            hdr += [which, len(keys), len(a)]; ks += keys; args += a
        cmd('EVALSHA', sw, len(ks), *ks, *hdr, *args)
    for s0 in range(0, n, b):
        idx = range(s0, min(n, s0 + b))
        keys = [(f"bench:u:{i % 64}" if cluster else f"bench:u:{i}", f"{u}:{2*i+1}") for i in idx]
        send(1, [acq_call(k, o) for k, o in keys])
        send(2, [rel_call(k, o, i) for (k, o), i in zip(keys, idx)])
    sys.exit(0)
if mode == 'fcall':
    lib = "#!lua name=distlock_cost\n" + helpers + \
        "redis.register_function('cost_acquire', function(KEYS, ARGV)\ntime_reply = nil\n" + \
        rd('lock_acquire.lua') + "\nend)\n" + \
        "redis.register_function('cost_release', function(KEYS, ARGV)\ntime_reply = nil\n" + \
        rd('lock_release.lua') + "\nend)\n"
    cmd('FUNCTION', 'LOAD', lib)
    for i in range(n):
        k = f"bench:u:{i % 64}" if cluster else f"bench:u:{i}"; o = f"{u}:{2*i+1}"
        keys, a = acq_call(k, o); cmd('FCALL', 'cost_acquire', len(keys), *keys, *a)
        keys, a = rel_call(k, o, i); cmd('FCALL', 'cost_release', len(keys), *keys, *a)
    sys.exit(0)
full = mode == 'full'
if full: mode = 'pair'
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
    if fast and mode in ('pair', 'acq') and not full:
        cmd('EVALSHA', sfa, 2, k, counter(k), 30000, o, 'distlock;vm;7137', *([floor] if cluster else []))
        if mode == 'pair':
            cmd('EVALSHA', sfr, 1, k, o)
        continue
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
