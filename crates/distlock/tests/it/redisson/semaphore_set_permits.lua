-- Redisson fixture: RedissonPermitExpirableSemaphore.setPermitsAsync(int permits): make the
-- total number of permits n, counting the leased ones. Since 3.19.1.
-- Redisson 4.7 (scripts unchanged since 3.52), written from the behaviour of Redisson's
-- source (read, not copied).
--
-- KEYS[1]  available-permits counter: the semaphore name
-- KEYS[2]  channel redisson_sc:{name}
-- KEYS[3]  leases {name}:timeout
-- ARGV[1]  n: the new total
-- ARGV[2]  publish command: PUBLISH
--
-- Returns  nil (the Java method is void). No reclaim: expired leases not yet reclaimed still
--          count as leased. The counter may go negative.

local available = redis.call('get', KEYS[1])
if available == false then
  redis.call('set', KEYS[1], ARGV[1])
  redis.call(ARGV[2], KEYS[2], ARGV[1])
  return nil
end
local maximum = redis.call('zcount', KEYS[3], 0, '+inf') + tonumber(available)
if maximum == tonumber(ARGV[1]) then
  return nil
end
redis.call('incrby', KEYS[1], tonumber(ARGV[1]) - maximum)
redis.call(ARGV[2], KEYS[2], ARGV[1])
return nil
