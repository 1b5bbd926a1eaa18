-- Redisson fixture: RedissonLock.unlockInnerAsync(threadId, requestId, timeout), the
-- RLock unlock with the request-id latch (since 3.24.0); also RFencedLock's unlock.
-- Redisson 4.7 (scripts unchanged since 3.52), written from the behaviour of Redisson's
-- source (read, not copied).
--
-- KEYS[1]  lock key: the lock name (hash)
-- KEYS[2]  channel: prefixName("redisson_lock__channel", name) = redisson_lock__channel:{name}
-- KEYS[3]  latch: redisson_unlock_latch:{name}:<32 hex request id> (the client DELs it after)
-- ARGV[1]  0 (LockPubSub.UNLOCK_MESSAGE)
-- ARGV[2]  internalLockLeaseTime ms (the lease kept by the remaining holds)
-- ARGV[3]  lockName: <uuid>:<threadId>
-- ARGV[4]  publish command: PUBLISH
-- ARGV[5]  latch timeout ms
--
-- Returns  1    the last hold: key deleted, '0' published on the channel
--          0    holds remain (lease reset to ARGV[2])
--          nil  not held by lockName (IllegalMonitorStateException)
--          a resent request (latch set) answers the first send's result

local val = redis.call('get', KEYS[3])
if val ~= false then
  return tonumber(val)
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
  return nil
end
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if counter > 0 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  redis.call('set', KEYS[3], 0, 'px', ARGV[5])
  return 0
end
redis.call('del', KEYS[1])
redis.call(ARGV[4], KEYS[2], ARGV[1])
redis.call('set', KEYS[3], 1, 'px', ARGV[5])
return 1
