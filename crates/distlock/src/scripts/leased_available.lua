-- leased_available.lua: reclaim ended leases, then report available permits and leases
-- (Redisson's availablePermits and acquiredPermits; their sum is its getPermits).
--
-- KEYS[1]  semaphore key <name> (string: available permits)
-- KEYS[2]  leases {<name>}:timeout (zset: 16-byte permit id -> expiry, ms)
-- KEYS[3]  channel redisson_sc:{<name>}
-- KEYS[4]  the leases key of older distlock versions, redisson__timeout__set:{<name>}
--
-- Returns  {available, leased}
-- Errors   WRONGTYPE when a key holds another type.
--
-- Uses now_ms from prelude.lua and migrate_leases, reclaim_leases from leases.lua (joined in
-- front by scripts/mod.rs).

local now = now_ms()
migrate_leases(KEYS[4], KEYS[2])
reclaim_leases(KEYS[1], KEYS[2], KEYS[3], now)
return {tonumber(redis.call('get', KEYS[1]) or '0'), redis.call('zcard', KEYS[2])}
