#!/usr/bin/env python3
"""RESP for `redis-cli --pipe`: N uncontended operation pairs of one Redisson primitive, with
the scripts and arguments Redisson 4.7 sends, for counting what they cost the server beside
distlock's (prims.sh). Scripts come from the project's Redisson fixtures
(crates/distlock/tests/it/redisson/*.lua); the three Redisson scripts the fixtures do not
cover yet are the short ones below, written from Redisson's behaviour: RSemaphore tryAcquire
and release, RCountDownLatch countDown, and the watchdog's renewExpirationAsync.

PRIMITIVE: lock (RLock tryLockInnerAsync + unlockInnerAsync with its latch, a name of its
own per pair), fair (RFairLock), write (RReadWriteLock's write lock), read (its read lock), semaphore (RSemaphore:
tryAcquire(1) + release(1), one name), leased (RPermitExpirableSemaphore: tryAcquire with a
lease + release(id), one name), latch (RCountDownLatch.countDown), extend (renewExpiration of
one held lock); and job, ShedLock's Redis provider (not Redisson): `SET NX PX` of the lock,
`DEL` on unlock (no lockAtLeastFor), a name of its own per pair.

usage: redisson.py PRIMITIVE N [PORT]
With PORT, the commands go to 127.0.0.1:PORT one at a time, each reply read before the next
is sent, as a client that waits for its answers sends them (and as distlock's cost_pairs
does); without it, they are written to stdout as RESP for `redis-cli --pipe` (pipelined,
which spares the server an event-loop turn per command). Prints `errors: N` at the end."""
import sys, hashlib, os
from resp import Conn, encode
prim = sys.argv[1]; n = int(sys.argv[2]); out = sys.stdout.buffer
conn = Conn(int(sys.argv[3])) if len(sys.argv) > 3 else None
FIX = os.path.join(os.path.dirname(os.path.abspath(__file__)), '../../crates/distlock/tests/it/redisson')
def cmd(*a):
    if conn:
        conn.cmd(*a)
    else:
        out.write(encode(*a))
shas = {}
def load(name, text=None):
    text = text or open(f"{FIX}/{name}.lua").read()
    shas[name] = hashlib.sha1(text.encode()).hexdigest(); cmd('SCRIPT', 'LOAD', text)
def ev(name, keys, args): cmd('EVALSHA', shas[name], len(keys), *keys, *args)
SEM_ACQ = ("local value = redis.call('get', KEYS[1]); if (value ~= false and tonumber(value) >= "
           "tonumber(ARGV[1])) then local val = redis.call('decrby', KEYS[1], ARGV[1]); return 1; "
           "end; return 0;")
SEM_REL = ("local value = redis.call('incrby', KEYS[1], ARGV[1]); "
           "redis.call(ARGV[2], KEYS[2], value);")
LATCH = ("local v = redis.call('decr', KEYS[1]);if v <= 0 then redis.call('del', KEYS[1]) end;"
         "if v == 0 then redis.call(ARGV[2], KEYS[2], ARGV[1]) end;")
RENEW = ("if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then redis.call('pexpire', KEYS[1], "
         "ARGV[1]); return 1; end; return 0;")
u = 'ae901363-43c5-4ff7-b666-e3c16e6aa114'
now = 1764200000000
if prim == 'lock':
    load('lock_lock'); load('lock_unlock')
elif prim == 'fair':
    load('fair_lock'); load('fair_unlock')
elif prim == 'write':
    load('rw_write_lock'); load('rw_write_unlock')
elif prim == 'read':
    load('rw_read_lock'); load('rw_read_unlock')
elif prim == 'semaphore':
    load('sem_acq', SEM_ACQ); load('sem_rel', SEM_REL); cmd('SET', 'cost', 1)
elif prim == 'leased':
    load('semaphore_try_acquire'); load('semaphore_release'); cmd('SET', 'cost', 1)
elif prim == 'latch':
    load('latch', LATCH); cmd('SET', 'cost', n + 2)
elif prim == 'job':
    pass
elif prim == 'extend':
    load('lock_lock'); load('renew', RENEW); ev('lock_lock', ['cost:extend'], [30000, f'{u}:1'])
else:
    sys.exit(f'unknown primitive {prim}')
for i in range(-1, n):
    k = f'cost:{i}'; o = f'{u}:{i + 2}'; latch = 'redisson_unlock_latch:{%s}:%032x' % (k, i + 2)
    if prim == 'lock':
        ev('lock_lock', [k], [30000, o])
        ev('lock_unlock', [k, 'redisson_lock__channel:{%s}' % k, latch], [0, 30000, o, 'PUBLISH', 13000])
    elif prim == 'fair':
        q, t = 'redisson_lock_queue:{%s}' % k, 'redisson_lock_timeout:{%s}' % k
        ev('fair_lock', [k, q, t], [30000, o, 300000, now + i])
        ev('fair_unlock', [k, q, t, 'redisson_lock__channel:{%s}' % k, latch],
           [0, 30000, o, now + i, 'PUBLISH', 13000])
    elif prim == 'write':
        ev('rw_write_lock', [k], [30000, o + ':write'])
        ev('rw_write_unlock', [k, 'redisson_rwlock:{%s}' % k, latch], [1, 30000, o + ':write', 'PUBLISH', 13000])
    elif prim == 'read':
        prefix = '{%s}:%s:rwlock_timeout' % (k, o)
        ev('rw_read_lock', [k, prefix], [30000, o, o + ':write'])
        ev('rw_read_unlock', [k, 'redisson_rwlock:{%s}' % k, prefix, '{%s}' % k, latch], [0, o, 'PUBLISH', 13000])
    elif prim == 'semaphore':
        ev('sem_acq', ['cost'], [1])
        ev('sem_rel', ['cost', 'redisson_sc:{cost}'], [1, 'PUBLISH'])
    elif prim == 'leased':
        pid = hashlib.md5(str(i).encode()).digest()
        ev('semaphore_try_acquire', ['cost', '{cost}:timeout', 'redisson_sc:{cost}'],
           [1, now + i + 30000, now + i, 922337203685477, 'PUBLISH', pid])
        ev('semaphore_release', ['cost', 'redisson_sc:{cost}', '{cost}:timeout'], [pid, 1, now + i, 'PUBLISH'])
    elif prim == 'latch':
        ev('latch', ['cost', 'redisson_countdownlatch__channel:{cost}'], [0, 'PUBLISH'])
    elif prim == 'job':
        cmd('SET', 'job-lock:default:' + k, 'ADDED:2026-11-27T00:00:00.000Z@host', 'NX', 'PX', 30000)
        cmd('DEL', 'job-lock:default:' + k)
    elif prim == 'extend':
        ev('renew', ['cost:extend'], [30000, f'{u}:1'])
if conn:
    print(f"errors: {conn.errors}")
