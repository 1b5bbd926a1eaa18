-- semaphore_give_back.lua: give back the permits of a semaphore acquire whose outcome its
-- caller does not know (it gave up waiting for the answer, or the grant was not confirmed by
-- the replicas), at most once, through the acquire's grant latch.
--
-- If the acquire ran, its permits are given back and its latch becomes the tombstone
-- 'undone:<k>'; if it has not run yet (still on its way, or queued on a stalled server), the
-- tombstone 'undone:' is left so that it does nothing when it runs (semaphore_acquire.lua
-- answers CANCELLED). A resend finds the tombstone and gives back nothing again.
--
-- KEYS[1]  semaphore key (string: available permits)
-- KEYS[2]  channel redisson_sc:{<name>}
-- KEYS[3]  the acquire's grant latch distlock_semaphore_grant:{<name>}:<request-id>
-- ARGV[1]  permits k
-- ARGV[2]  tombstone TTL in ms (as long as the grant latch lives)
--
-- Returns  the permits available afterwards, or GONE (-1) when nothing was given back (the
--          acquire never ran, or was given back already).
-- Errors   WRONGTYPE when KEYS[1] holds another type.

local prior = redis.call('get', KEYS[3])
if prior == false then
  redis.call('set', KEYS[3], 'undone:', 'px', ARGV[2])
  return -1
end
if string.sub(prior, 1, 7) == 'undone:' then
  return -1
end
redis.call('set', KEYS[3], 'undone:' .. prior, 'px', ARGV[2])
local v = redis.call('incrby', KEYS[1], ARGV[1])
-- A user without channel rights still gives back (waiters fall back to polling).
publish(KEYS[2], v)
return v
