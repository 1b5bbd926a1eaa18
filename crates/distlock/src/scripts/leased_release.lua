-- leased_release.lua: give back a leased permit if its lease is still running.
--
-- KEYS[1]  semaphore key (string: available permits)
-- KEYS[2]  leases redisson__timeout__set:{<name>}
-- KEYS[3]  channel redisson_sc:{<name>}
-- ARGV[1]  permit id
--
-- Returns  1 given back; -1 not held (unknown id, or its lease ended: it was or will be
--          reclaimed).
--
-- Uses now_ms from prelude.lua (joined in front by scripts/mod.rs).

local now = now_ms()
local expiry = redis.call('zscore', KEYS[2], ARGV[1])
if expiry == false then
  return -1
end
redis.call('zrem', KEYS[2], ARGV[1])
local v = redis.call('incrby', KEYS[1], 1)
-- pcall: a user without rights on the channel (NOPERM) still gets the
-- result of what was done; waiters re-check on their own.
redis.pcall('publish', KEYS[3], v)
if tonumber(expiry) <= now then
  return -1
end
return 1
