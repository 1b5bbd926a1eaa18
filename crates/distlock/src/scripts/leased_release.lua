-- leased_release.lua: give back a leased permit (Redisson's tryRelease(id)), handing it to the
-- first live waiter of the direct hand-off queue when there is one; also how a waiter that
-- gives up leaves the queue (and gives back a hand-off that raced it).
--
-- KEYS[1]  semaphore key <name> (string: available permits)
-- KEYS[2]  leases {<name>}:timeout (zset: 16-byte permit id -> expiry, ms)
-- KEYS[3]  channel redisson_sc:{<name>}
-- KEYS[4]  the leases key of older distlock versions, redisson__timeout__set:{<name>}
-- KEYS[5]  direct hand-off queue distlock_permit_queue:{<name>} (zset; see permit_queue.lua)
-- KEYS[6]  its waiter entries distlock_permit_waiters:{<name>} (hash)
-- ARGV[1]  permit id: 16 raw bytes
--
-- Returns  1 given back; GONE (-1) not held (unknown id, or its lease ended: the permit was or is
--          now counted back all the same). Either way the id is no longer queued.
--          The permit goes to the queue's live waiters first (permit_queue.lua's serve); the
--          count left is published on KEYS[3] as Redisson does, unless a hand-off took the
--          last permit (nothing is left for a woken waiter to take).
-- Errors   WRONGTYPE when a key holds another type.
--
-- Uses now_ms from prelude.lua, migrate_leases and lease_permit from leases.lua, and
-- permit_queue from permit_queue.lua (joined in front by scripts/mod.rs).

local now = now_ms()
migrate_leases(KEYS[4], KEYS[2])
local queued = redis.call('exists', KEYS[5]) == 1
local q
if queued then
  q = permit_queue()
  q.dequeue(KEYS[5], KEYS[6], ARGV[1])
end
local expiry = redis.call('zscore', KEYS[2], ARGV[1])
if expiry == false then
  return -1
end
redis.call('zrem', KEYS[2], ARGV[1])
local v = redis.call('incrby', KEYS[1], 1)
local served = false
if queued and v >= 1 then
  local left = q.serve(KEYS[1], KEYS[2], KEYS[5], KEYS[6], v, now, nil)
  served, v = left < v, left
end
-- As Redisson: the new count, whatever it is (unless a hand-off took the last permit).
-- pcall: a user without rights on the channel (NOPERM) still gets the result of what was
-- done; waiters re-check on their own.
if v > 0 or not served then
  publish(KEYS[3], v)
end
if tonumber(expiry) <= now then
  return -1
end
return 1
