-- Redisson fixture: RedissonFairLock.unlockInnerAsync(threadId, requestId, timeout), the
-- RFairLock unlock (wakes only the head waiter, on its own channel).
-- Redisson 4.7 (scripts unchanged since 3.52); unlock latch since 3.24.0. Written from the
-- behaviour of Redisson's source (read, not copied).
--
-- KEYS[1]  lock key: the lock name (hash)
-- KEYS[2]  queue: redisson_lock_queue:{name}
-- KEYS[3]  deadlines: redisson_lock_timeout:{name}
-- KEYS[4]  channel base: redisson_lock__channel:{name} (a waiter's channel is
--          <base>:<lockName>)
-- KEYS[5]  latch: redisson_unlock_latch:{name}:<32 hex request id> (the client DELs it after)
-- ARGV[1]  0 (LockPubSub.UNLOCK_MESSAGE)
-- ARGV[2]  internalLockLeaseTime ms (the lease kept by the remaining holds)
-- ARGV[3]  lockName: <uuid>:<threadId>
-- ARGV[4]  now: client System.currentTimeMillis()
-- ARGV[5]  publish command: PUBLISH
-- ARGV[6]  latch timeout ms
--
-- Returns  1    the last hold (key deleted), or the lock did not exist; the head waiter is
--               woken with '0' on its channel. The head is not popped, deadlines unchanged.
--          0    holds remain (lease reset to ARGV[2])
--          nil  not held by lockName (IllegalMonitorStateException)
--          a resent request (latch set) answers the first send's result

local val = redis.call('get', KEYS[5])
if val ~= false then
  return tonumber(val)
end

local now = tonumber(ARGV[4])

-- Remove stale waiters: only the head is examined.
while true do
  local first = redis.call('lindex', KEYS[2], 0)
  if first == false then
    break
  end
  local timeout = redis.call('zscore', KEYS[3], first)
  if timeout ~= false and tonumber(timeout) <= now then
    redis.call('zrem', KEYS[3], first)
    redis.call('lpop', KEYS[2])
  else
    break
  end
end

if redis.call('exists', KEYS[1]) == 0 then
  local next_waiter = redis.call('lindex', KEYS[2], 0)
  if next_waiter ~= false then
    redis.call(ARGV[5], KEYS[4] .. ':' .. next_waiter, ARGV[1])
  end
  redis.call('set', KEYS[5], 1, 'px', ARGV[6])
  return 1
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
  return nil
end
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if counter > 0 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  redis.call('set', KEYS[5], 0, 'px', ARGV[6])
  return 0
end
redis.call('del', KEYS[1])
redis.call('set', KEYS[5], 1, 'px', ARGV[6])
local next_waiter = redis.call('lindex', KEYS[2], 0)
if next_waiter ~= false then
  redis.call(ARGV[5], KEYS[4] .. ':' .. next_waiter, ARGV[1])
end
return 1
