-- semaphore_release.lua: give back k permits and wake waiters (Redisson's
-- RedissonSemaphore.release / addPermits). With ARGV[2] = '1', give back only if the grant
-- latch KEYS[3] exists (and delete it): this is how a cancelled acquire returns a grant it
-- may or may not have got.
--
-- KEYS[1]  semaphore key (string: available permits)
-- KEYS[2]  channel redisson_sc:{<name>}
-- KEYS[3]  grant latch distlock_semaphore_grant:{<name>}:<request-id>
-- ARGV[1]  permits k
-- ARGV[2]  '1': only if the latch exists (and delete it); '0': unconditionally
--
-- Returns  the permits available afterwards, or -1 when nothing was given back.
-- Errors   WRONGTYPE when KEYS[1] holds another type.

if ARGV[2] == '1' and redis.call('del', KEYS[3]) == 0 then
  return -1
end
local v = redis.call('incrby', KEYS[1], ARGV[1])
redis.call('publish', KEYS[2], v)
return v
