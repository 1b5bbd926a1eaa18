-- leased_available.lua: reclaim expired leases, then report available permits and live
-- leases.
--
-- KEYS[1]  semaphore key (string: available permits)
-- KEYS[2]  leases redisson__timeout__set:{<name>}
-- KEYS[3]  channel redisson_sc:{<name>}
--
-- Returns  {available, leased}
-- Errors   WRONGTYPE when a key holds another type.
--
-- Uses now_ms from prelude.lua (joined in front by scripts/mod.rs).

local now = now_ms()
local expired = redis.call('zremrangebyscore', KEYS[2], '-inf', now)
if expired > 0 then
  local v = redis.call('incrby', KEYS[1], expired)
  -- pcall: a user without rights on the channel (NOPERM) still gets the
  -- result of what was done; waiters re-check on their own.
  redis.pcall('publish', KEYS[3], v)
end
return {tonumber(redis.call('get', KEYS[1]) or '0'), redis.call('zcard', KEYS[2])}
