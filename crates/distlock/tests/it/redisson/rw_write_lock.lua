-- Redisson fixture: RedissonWriteLock.tryLockInnerAsync(waitTime, leaseTime, unit, threadId),
-- one attempt at the write lock of an RReadWriteLock. Redisson 4.7, written from the
-- behaviour of Redisson's source (read, not copied).
--
-- KEYS[1]  lock key: the lock name (hash with 'mode')
-- ARGV[1]  leaseTime ms (internalLockLeaseTime for lock() without a lease)
-- ARGV[2]  lockName: <uuid>:<threadId>:write
--
-- Returns  nil  acquired (a free lock, or one more hold of this thread's write lock, whose
--               TTL then grows by the lease); otherwise the lock's PTTL.

local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
  redis.call('hset', KEYS[1], 'mode', 'write')
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], redis.call('pttl', KEYS[1]) + ARGV[1])
  return nil
end
return redis.call('pttl', KEYS[1])
