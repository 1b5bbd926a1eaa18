-- lock_force_unlock.lua: delete a lock whoever holds it and wake its waiters.
--
-- Redisson's forceUnlockAsync.
--
-- KEYS[1]  lock key
-- KEYS[2]  wake channel redisson_lock__channel:{name}
-- ARGV[1]  unlock message ('0')
--
-- Returns  1 the lock existed and was deleted; 0 it did not exist.

if redis.call('del', KEYS[1]) == 1 then
  redis.call('publish', KEYS[2], ARGV[1])
  return 1
end
return 0
