-- Redisson fixture: RedissonReadLock.tryLockInnerAsync(waitTime, leaseTime, unit, threadId),
-- one attempt at the read lock of an RReadWriteLock. Redisson 4.7, written from the
-- behaviour of Redisson's source (read, not copied).
--
-- KEYS[1]  lock key: the lock name (hash with 'mode')
-- KEYS[2]  this thread's read-hold timeout prefix: {name}:<uuid>:<threadId>:rwlock_timeout
-- ARGV[1]  leaseTime ms (internalLockLeaseTime for lock() without a lease)
-- ARGV[2]  lockName: <uuid>:<threadId>
-- ARGV[3]  write lock name: <uuid>:<threadId>:write
--
-- Returns  nil  acquired: the thread's read hold count rises by one, each hold has a
--               timeout key <prefix>:<n> with the lease, and the lock lives at least the
--               lease; otherwise the lock's PTTL (write-held by another thread).

local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
  redis.call('hset', KEYS[1], 'mode', 'read')
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('set', KEYS[2] .. ':1', 1)
  redis.call('pexpire', KEYS[2] .. ':1', ARGV[1])
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if mode == 'read' or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then
  local n = redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('set', KEYS[2] .. ':' .. n, 1)
  redis.call('pexpire', KEYS[2] .. ':' .. n, ARGV[1])
  local left = redis.call('pttl', KEYS[1])
  redis.call('pexpire', KEYS[1], math.max(left, tonumber(ARGV[1])))
  return nil
end
return redis.call('pttl', KEYS[1])
