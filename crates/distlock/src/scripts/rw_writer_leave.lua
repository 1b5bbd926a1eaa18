-- rw_writer_leave.lua: a waiting writer gives up (cancelled or timed out): leave the set of
-- waiting writers, and wake readers held back by it.
--
-- KEYS[1]  waiting writers distlock_rwlock_writers:{<name>}
-- KEYS[2]  wake channel redisson_rwlock:{<name>}
-- ARGV[1]  owner field
--
-- Returns  1 when the owner was waiting, else 0.

local removed = redis.call('zrem', KEYS[1], ARGV[1])
if removed == 1 then
  -- pcall: a user without rights on the channel (NOPERM) still gets the
  -- result of what was done; waiters re-check on their own.
  publish(KEYS[2], '1')
end
return removed
