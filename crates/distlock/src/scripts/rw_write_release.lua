-- rw_write_release.lua: release one write hold (Redisson's RedissonWriteLock unlock, with the
-- unlock latch and not-held codes). When read holds of the same owner remain (downgrade), the
-- mode becomes 'read'; either way all waiters are woken (message '1').
--
-- KEYS[1]  lock key (hash)
-- KEYS[2]  wake channel redisson_rwlock:{<name>}
-- KEYS[3]  unlock latch redisson_unlock_latch:{<name>}:<request-id>
-- ARGV[1]  wake-all message ('1', Redisson's READ_UNLOCK_MESSAGE)
-- ARGV[2]  lease in ms for remaining write holds
-- ARGV[3]  owner's write field <owner>:write
-- ARGV[4]  latch TTL in ms
--
-- Returns  1 last write hold released; 0 write holds remain; -1 gone; -2 not held.
-- Errors   WRONGTYPE when KEYS[1] holds another type (before any write).

local prior = redis.call('get', KEYS[3])
if prior then return tonumber(prior) end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then return -1 end
if mode ~= 'write' or redis.call('hexists', KEYS[1], ARGV[3]) == 0 then return -2 end
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if counter > 0 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  redis.call('set', KEYS[3], 0, 'px', ARGV[4])
  return 0
end
redis.call('hdel', KEYS[1], ARGV[3])
if redis.call('hlen', KEYS[1]) == 1 then
  redis.call('del', KEYS[1])
else
  redis.call('hset', KEYS[1], 'mode', 'read')
end
-- pcall: a user without rights on the channel (NOPERM) still gets the
-- result of what was done; waiters re-check on their own.
publish(KEYS[2], ARGV[1])
redis.call('set', KEYS[3], 1, 'px', ARGV[4])
return 1
