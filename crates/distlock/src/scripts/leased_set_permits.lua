-- leased_set_permits.lua: set a leased semaphore's size, keeping the permits held now valid
-- (Redisson's RPermitExpirableSemaphore.setPermits). The size is the available permits plus
-- the leases (Redisson's getPermits). A semaphore without a counter is created with N
-- available permits. Otherwise the counter moves by N − size: growing frees permits at once;
-- shrinking below what is held leaves the counter below zero, so no permit is granted until
-- enough holders have given theirs back (no holder loses its permit). Leases that ended are
-- counted until reclaimed, as Redisson counts them; reclaiming moves them into the counter,
-- which keeps the size.
--
-- KEYS[1]  semaphore key <name> (string: available permits, may be below zero)
-- KEYS[2]  leases {<name>}:timeout (zset: 16-byte permit id -> expiry, ms)
-- KEYS[3]  channel redisson_sc:{<name>}
-- KEYS[4]  the leases key of older distlock versions, redisson__timeout__set:{<name>}
--          (migrated into KEYS[2] when present, so its leases are counted)
-- ARGV[1]  the new size N (permits, >= 1)
--
-- Returns  the size before (0 when the semaphore had no counter).
-- Errors   WRONGTYPE when a key holds another type; for KEYS[1], or a string in it that is not
--          an integer (shapes.lua's count_of), before any write. An integer is a semaphore's
--          permits in Redisson's layout, which no script can tell from other data that looks
--          like one: it is counted as one.
--
-- Publishes the new available count on KEYS[3] when it is above zero (waiters re-check).
--
-- Uses count_of from shapes.lua and migrate_leases from leases.lua (joined in front by
-- scripts/mod.rs).

-- The counter is checked first: nothing is written (the leases not migrated) when it is
-- another kind's data or a user's.
local available, refused = count_of(KEYS[1])
if refused then
  return refused
end
migrate_leases(KEYS[4], KEYS[2])
local want = tonumber(ARGV[1])
local before = 0
local now_available = want
if available == false then
  redis.call('set', KEYS[1], want)
else
  before = available + redis.call('zcard', KEYS[2])
  if before == want then
    return before
  end
  now_available = redis.call('incrby', KEYS[1], want - before)
end
if now_available > 0 then
  publish(KEYS[3], now_available)
end
return before
