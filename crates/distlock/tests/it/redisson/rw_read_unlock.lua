-- Redisson fixture: RedissonReadLock.unlockInnerAsync(threadId, requestId, timeout), the
-- read unlock of an RReadWriteLock with the request-id latch. Redisson 4.7, written from
-- the behaviour of Redisson's source (read, not copied).
--
-- KEYS[1]  lock key: the lock name (hash)
-- KEYS[2]  channel: prefixName("redisson_rwlock", name) = redisson_rwlock:{name}
-- KEYS[3]  this thread's read-hold timeout prefix: {name}:<uuid>:<threadId>:rwlock_timeout
-- KEYS[4]  the lock's key prefix: {name}
-- KEYS[5]  latch: redisson_unlock_latch:{name}:<32 hex request id>
-- ARGV[1]  0 (LockPubSub.UNLOCK_MESSAGE)
-- ARGV[2]  lockName: <uuid>:<threadId>
-- ARGV[3]  publish command: PUBLISH
-- ARGV[4]  latch TTL ms
--
-- Returns  1 the lock deleted and the message published (the last hold of the last holder,
--          or no lock at all); 0 holds remain (the lock lives as long as the longest read
--          hold's timeout key); nil not this thread's read lock. A resend answers the latch.

local latched = redis.call('get', KEYS[5])
if latched ~= false then
  return tonumber(latched)
end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
  redis.call(ARGV[3], KEYS[2], ARGV[1])
  redis.call('set', KEYS[5], 1, 'px', ARGV[4])
  return 1
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  return nil
end
local left = redis.call('hincrby', KEYS[1], ARGV[2], -1)
if left == 0 then
  redis.call('hdel', KEYS[1], ARGV[2])
end
redis.call('del', KEYS[3] .. ':' .. (left + 1))
if redis.call('hlen', KEYS[1]) > 1 then
  local longest = -3
  for _, field in ipairs(redis.call('hkeys', KEYS[1])) do
    local holds = tonumber(redis.call('hget', KEYS[1], field))
    if type(holds) == 'number' then
      for i = holds, 1, -1 do
        local ttl = redis.call('pttl', KEYS[4] .. ':' .. field .. ':rwlock_timeout:' .. i)
        longest = math.max(ttl, longest)
      end
    end
  end
  if longest > 0 then
    redis.call('pexpire', KEYS[1], longest)
    redis.call('set', KEYS[5], 0, 'px', ARGV[4])
    return 0
  end
  if mode == 'write' then
    redis.call('set', KEYS[5], 0, 'px', ARGV[4])
    return 0
  end
end
redis.call('del', KEYS[1])
redis.call(ARGV[3], KEYS[2], ARGV[1])
redis.call('set', KEYS[5], 1, 'px', ARGV[4])
return 1
