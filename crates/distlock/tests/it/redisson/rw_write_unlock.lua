-- Redisson fixture: RedissonWriteLock.unlockInnerAsync(threadId, requestId, timeout), the
-- write unlock of an RReadWriteLock with the request-id latch. Redisson 4.7, written from
-- the behaviour of Redisson's source (read, not copied).
--
-- KEYS[1]  lock key: the lock name (hash)
-- KEYS[2]  channel: prefixName("redisson_rwlock", name) = redisson_rwlock:{name}
-- KEYS[3]  latch: redisson_unlock_latch:{name}:<32 hex request id>
-- ARGV[1]  1 (LockPubSub.READ_UNLOCK_MESSAGE)
-- ARGV[2]  internalLockLeaseTime ms (the lease kept by the remaining holds)
-- ARGV[3]  lockName: <uuid>:<threadId>:write
-- ARGV[4]  publish command: PUBLISH
-- ARGV[5]  latch TTL ms
--
-- Returns  1 the last write hold released (the lock deleted and the message published, or,
--          with read holds of the thread left, the mode set to 'read' without a message);
--          0 holds remain; nil not this thread's write lock. A resend answers the latch.

local latched = redis.call('get', KEYS[3])
if latched ~= false then
  return tonumber(latched)
end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
  redis.call(ARGV[4], KEYS[2], ARGV[1])
  redis.call('set', KEYS[3], 1, 'px', ARGV[5])
  return 1
end
if mode ~= 'write' or redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
  return nil
end
local left = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if left > 0 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  redis.call('set', KEYS[3], 0, 'px', ARGV[5])
  return 0
end
redis.call('hdel', KEYS[1], ARGV[3])
if redis.call('hlen', KEYS[1]) == 1 then
  redis.call('del', KEYS[1])
  redis.call(ARGV[4], KEYS[2], ARGV[1])
else
  redis.call('hset', KEYS[1], 'mode', 'read')
end
redis.call('set', KEYS[3], 1, 'px', ARGV[5])
return 1
