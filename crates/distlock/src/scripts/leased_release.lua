-- leased_release.lua: give back a leased permit (Redisson's tryRelease(id)).
--
-- KEYS[1]  semaphore key <name> (string: available permits)
-- KEYS[2]  leases {<name>}:timeout (zset: 16-byte permit id -> expiry, ms)
-- KEYS[3]  channel redisson_sc:{<name>}
-- KEYS[4]  the leases key of older distlock versions, redisson__timeout__set:{<name>}
-- ARGV[1]  permit id: 16 raw bytes
--
-- Returns  1 given back; -1 not held (unknown id, or its lease ended: the permit was or is
--          now counted back all the same).
-- Errors   WRONGTYPE when a key holds another type.
--
-- Uses now_ms from prelude.lua and migrate_leases from leases.lua (joined in front by
-- scripts/mod.rs).

local now = now_ms()
migrate_leases(KEYS[4], KEYS[2])
local expiry = redis.call('zscore', KEYS[2], ARGV[1])
if expiry == false then
  return -1
end
redis.call('zrem', KEYS[2], ARGV[1])
local v = redis.call('incrby', KEYS[1], 1)
-- As Redisson: the new count, whatever it is. pcall: a user without rights on the channel
-- (NOPERM) still gets the result of what was done; waiters re-check on their own.
publish(KEYS[3], v)
if tonumber(expiry) <= now then
  return -1
end
return 1
