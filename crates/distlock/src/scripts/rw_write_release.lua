-- rw_write_release.lua: release one write hold (Redisson's RedissonWriteLock unlock, with the
-- unlock latch and not-held codes). When read holds of the same owner remain (downgrade), the
-- mode becomes 'read' and all waiters are woken (message '1'). When the last hold goes, the
-- lock is handed to the first live queued distlock writer (rw_handoff.lua), or, with nobody
-- queued, all waiters are woken.
--
-- KEYS[1]  lock key (hash)
-- KEYS[2]  wake channel redisson_rwlock:{<name>}
-- KEYS[3]  unlock latch redisson_unlock_latch:{<name>}:<request-id>
-- KEYS[4]  fencing counter of the lock's slot (for a hand-off's token)
-- KEYS[5]  hand-off queue distlock_rwlock_queue:{<name>} (zset; see rw_handoff.lua)
-- KEYS[6]  its writer entries distlock_rwlock_waiters:{<name>} (hash)
-- KEYS[7]  waiting writers distlock_rwlock_writers:{<name>} (zset)
-- ARGV[1]  wake-all message ('1', Redisson's READ_UNLOCK_MESSAGE)
-- ARGV[2]  lease in ms for remaining write holds
-- ARGV[3]  owner's write field <owner>:write
-- ARGV[4]  latch TTL in ms
-- ARGV[5]  token floor of a hand-off, as rw_write_acquire.lua's ARGV[7]
--
-- The final release writes no unlock latch (as lock_release.lua's): a resend of it finds the
-- lock gone or re-taken and is reported as unconfirmed, and no record outlives the lock.
--
-- Returns  1 last write hold released; 0 write holds remain; GONE (-1);
--          HELD_BY_OTHER (-2).
-- Errors   WRONGTYPE when KEYS[1] holds another type (before any write).
--
-- Uses prelude.lua, handoff.lua and rw_handoff.lua (joined in front by scripts/mod.rs).

local prior = redis.call('get', KEYS[3])
if prior then return tonumber(prior) end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
  -- Gone, or a hash without a mode field: another kind's (a plain or fair lock), untouched.
  if redis.call('exists', KEYS[1]) == 1 then return -2 end
  return -1
end
if mode ~= 'write' or redis.call('hexists', KEYS[1], ARGV[3]) == 0 then return -2 end
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if counter > 0 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  redis.call('set', KEYS[3], 0, 'px', ARGV[4])
  return 0
end
redis.call('hdel', KEYS[1], ARGV[3])
rw_write_gone(KEYS[1], KEYS[2], ARGV[1], KEYS[4], ARGV[5], KEYS[5], KEYS[6], KEYS[7])
return 1
