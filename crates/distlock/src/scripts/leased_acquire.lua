-- leased_acquire.lua: take one permit with a lease (Redisson's RPermitExpirableSemaphore
-- layout: available count + zset of permit ids -> expiry), reclaiming expired permits first.
-- Expiry is server time (TIME, ms), not the client's clock as in Redisson.
--
-- KEYS[1]  semaphore key (string: available permits)
-- KEYS[2]  leases redisson__timeout__set:{<name>} (zset permit id -> expiry, ms)
-- KEYS[3]  channel redisson_sc:{<name>}
-- ARGV[1]  permit id (chosen by the caller, so a resend or a cancel can find it)
-- ARGV[2]  lease in ms
--
-- Returns  {1, expiry_ms}   taken (or already taken under this id)
--          {0, wait_ms}     none available; wait_ms until the earliest lease ends (-1: none)
-- Errors   WRONGTYPE when a key holds another type.
--
-- Uses now_ms from prelude.lua (joined in front by scripts/mod.rs).

local now = now_ms()
local expired = redis.call('zrangebyscore', KEYS[2], '-inf', now)
if #expired > 0 then
  redis.call('zremrangebyscore', KEYS[2], '-inf', now)
  local v = redis.call('incrby', KEYS[1], #expired)
  -- pcall: a user without rights on the channel (NOPERM) still gets the
  -- result of what was done; waiters re-check on their own.
  redis.pcall('publish', KEYS[3], v)
end
local mine = redis.call('zscore', KEYS[2], ARGV[1])
if mine ~= false then
  return {1, tonumber(mine)}
end
local value = redis.call('get', KEYS[1])
if value ~= false and tonumber(value) >= 1 then
  redis.call('decrby', KEYS[1], 1)
  local expiry = now + tonumber(ARGV[2])
  redis.call('zadd', KEYS[2], expiry, ARGV[1])
  return {1, expiry}
end
local first = redis.call('zrange', KEYS[2], 0, 0, 'WITHSCORES')
if first[2] ~= nil then
  return {0, tonumber(first[2]) - now}
end
return {0, -1}
