-- Redisson fixture: RedissonPermitExpirableSemaphore.acquiredPermitsAsync(), the number of
-- permits leased out. Since 3.19.1.
-- Redisson 4.7 (scripts unchanged since 3.52), written from the behaviour of Redisson's
-- source (read, not copied).
--
-- KEYS[1]  available-permits counter: the semaphore name
-- KEYS[2]  leases {name}:timeout
-- KEYS[3]  channel redisson_sc:{name}
-- ARGV[1]  now: client System.currentTimeMillis()
-- ARGV[2]  publish command: PUBLISH
--
-- Returns  ZCOUNT {name}:timeout 0 +inf after reclaiming every expired lease.

local expired = redis.call('zrangebyscore', KEYS[2], 0, ARGV[1], 'limit', 0, -1)
if #expired > 0 then
  redis.call('zrem', KEYS[2], unpack(expired))
  local value = redis.call('incrby', KEYS[1], #expired)
  if value > 0 then
    redis.call(ARGV[2], KEYS[3], value)
  end
end
return redis.call('zcount', KEYS[2], 0, '+inf')
