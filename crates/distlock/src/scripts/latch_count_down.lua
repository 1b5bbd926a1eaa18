-- latch_count_down.lua: count a latch down by one; at zero delete it and wake every waiter
-- (Redisson's RedissonCountDownLatch.countDown).
--
-- KEYS[1]  latch key (string count)
-- KEYS[2]  channel redisson_countdownlatch__channel__{<name>}
-- ARGV[1]  zero-count message ('0')
--
-- Returns  the count left (0 when the latch opened or was already open).
-- Errors   WRONGTYPE when KEYS[1] holds another type.

if redis.call('exists', KEYS[1]) == 0 then
  return 0
end
local v = redis.call('decr', KEYS[1])
if v <= 0 then
  redis.call('del', KEYS[1])
  redis.call('publish', KEYS[2], ARGV[1])
  return 0
end
return v
