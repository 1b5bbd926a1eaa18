-- leased_acquire.lua: take one permit with a lease, in Redisson's RPermitExpirableSemaphore
-- layout, reclaiming ended leases first. Expiry is server time (TIME, ms since the epoch) —
-- the same unit and epoch as Redisson's client-clock scores, so both sides read the zset
-- alike (hosts are expected to keep their clocks in sync, as Redisson itself assumes).
--
-- KEYS[1]  semaphore key <name> (string: available permits)
-- KEYS[2]  leases {<name>}:timeout (zset: 16-byte permit id -> expiry, ms)
-- KEYS[3]  channel redisson_sc:{<name>}
-- KEYS[4]  the leases key of older distlock versions, redisson__timeout__set:{<name>}
--          (migrated into KEYS[2] when present)
-- ARGV[1]  permit id: 16 raw bytes (chosen by the caller, so a resend or a cancel finds it)
-- ARGV[2]  lease in ms
--
-- Returns  {1, expiry_ms}   taken (or already taken under this id)
--          {0, wait_ms}     none available; wait_ms until the earliest lease ends (-1: none
--                           that ends on its own)
-- Errors   WRONGTYPE when a key holds another type.
--
-- Uses now_ms from prelude.lua and migrate_leases, reclaim_leases, earliest_lease_end from
-- leases.lua (joined in front by scripts/mod.rs).

local now = now_ms()
migrate_leases(KEYS[4], KEYS[2])
reclaim_leases(KEYS[1], KEYS[2], KEYS[3], now)
local mine = redis.call('zscore', KEYS[2], ARGV[1])
if mine ~= false then
  return {1, tonumber(mine)}
end
local value = redis.call('get', KEYS[1])
if value ~= false and tonumber(value) >= 1 then
  redis.call('decrby', KEYS[1], 1)
  local expiry = now + tonumber(ARGV[2])
  redis.call('zadd', KEYS[2], expiry, ARGV[1])
  -- As Redisson: the leases live as long as the counter when it has a TTL.
  local ttl = redis.call('pttl', KEYS[1])
  if ttl > 0 then
    redis.call('pexpire', KEYS[2], ttl)
  end
  return {1, expiry}
end
local ends = earliest_lease_end(KEYS[2])
if ends ~= nil then
  return {0, math.max(ends - now, 0)}
end
return {0, -1}
