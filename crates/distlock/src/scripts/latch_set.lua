-- latch_set.lua: set a count-down latch's count if it has none (Redisson's
-- RedissonCountDownLatch.trySetCount).
--
-- KEYS[1]  latch key (string count)
-- KEYS[2]  channel redisson_countdownlatch__channel__{<name>}
-- ARGV[1]  new-count message ('1')
-- ARGV[2]  count
--
-- Returns  1 set; 0 the latch already had a count.

if redis.call('exists', KEYS[1]) == 0 then
  redis.call('set', KEYS[1], ARGV[2])
  -- pcall: a user without rights on the channel (NOPERM) still gets the
  -- result of what was done; waiters re-check on their own.
  publish(KEYS[2], ARGV[1])
  return 1
end
return 0
