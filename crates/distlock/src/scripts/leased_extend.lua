-- leased_extend.lua: move a leased permit's expiry to now + lease, if it has not ended
-- (Redisson's updateLeaseTime, without extending an ended lease).
--
-- KEYS[1]  leases {<name>}:timeout (zset: 16-byte permit id -> expiry, ms)
-- KEYS[2]  the leases key of older distlock versions, redisson__timeout__set:{<name>}
-- ARGV[1]  permit id: 16 raw bytes
-- ARGV[2]  lease in ms
--
-- Returns  {1, expiry_ms} extended; {GONE} (-1) not held (unknown id or lease
--          ended).
-- Errors   WRONGTYPE when a key holds another type.
--
-- Uses now_ms from prelude.lua and migrate_leases from leases.lua (joined in front by
-- scripts/mod.rs).

local now = now_ms()
migrate_leases(KEYS[2], KEYS[1])
local expiry = redis.call('zscore', KEYS[1], ARGV[1])
if expiry == false or tonumber(expiry) <= now then
  return {-1}
end
local new_expiry = now + tonumber(ARGV[2])
redis.call('zadd', KEYS[1], new_expiry, ARGV[1])
return {1, new_expiry}
