-- semaphore_set.lua: set a semaphore's permits if it has none (Redisson's
-- RedissonSemaphore.trySetPermits); also used by the leased semaphore.
--
-- KEYS[1]  semaphore key (string: available permits)
-- KEYS[2]  channel redisson_sc:{<name>}
-- ARGV[1]  permits
--
-- Returns  1 set; 0 the semaphore already had permits.

if redis.call('exists', KEYS[1]) == 0 then
  redis.call('set', KEYS[1], ARGV[1])
  -- pcall: a user without rights on the channel (NOPERM) still gets the
  -- result of what was done; waiters re-check on their own.
  publish(KEYS[2], ARGV[1])
  return 1
end
return 0
