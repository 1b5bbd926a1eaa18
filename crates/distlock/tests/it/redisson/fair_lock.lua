-- Redisson fixture: RedissonFairLock.tryLockInnerAsync(waitTime, leaseTime, unit, threadId,
-- RedisCommands.EVAL_LONG), the "with wait" variant behind RFairLock.lock() and
-- tryLock(wait, ...).
-- Redisson 4.7 (scripts unchanged since 3.52), written from the behaviour of Redisson's
-- source (read, not copied): nil-safe stale check 3.31.0, max(0, pttl) for a queued waiter
-- 3.32.0, nil-safe last-waiter score 3.45.0.
--
-- KEYS[1]  lock key: the lock name (hash, field lockName -> hold count)
-- KEYS[2]  queue: redisson_lock_queue:{name} (list of lockNames, head first)
-- KEYS[3]  deadlines: redisson_lock_timeout:{name} (zset lockName -> absolute ms after which
--          the waiter is stale, client clocks)
-- ARGV[1]  leaseMs: the explicit lease, or lockWatchdogTimeout (30000) with the watchdog
-- ARGV[2]  lockName: <uuid>:<threadId>
-- ARGV[3]  wait ms: tryLock's waitTime, or fairLockWaitTimeout (default 300000) for lock()
-- ARGV[4]  now: client System.currentTimeMillis()
--
-- Returns  nil   acquired (the head or an empty queue, lock free) or re-entered
--          ttl   not acquired: ms to wait on the waiter's own channel
--                redisson_lock__channel:{name}:<lockName> before retrying (< 0: wait for
--                a message only). A new waiter is queued at the tail.

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

-- Acquire: the lock is free and the queue is empty or we are its head.
if (redis.call('exists', KEYS[1]) == 0)
    and ((redis.call('exists', KEYS[2]) == 0) or (redis.call('lindex', KEYS[2], 0) == ARGV[2])) then
  redis.call('lpop', KEYS[2])
  redis.call('zrem', KEYS[3], ARGV[2])
  -- Every remaining waiter's deadline moves earlier by our wait.
  local waiters = redis.call('zrange', KEYS[3], 0, -1)
  for i = 1, #waiters do
    redis.call('zincrby', KEYS[3], -tonumber(ARGV[3]), waiters[i])
  end
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end

-- Re-entry.
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end

-- Already queued: the lock's PTTL (at least 0); the own deadline is not refreshed.
if redis.call('zscore', KEYS[3], ARGV[2]) ~= false then
  return math.max(0, redis.call('pttl', KEYS[1]))
end

-- Enqueue at the tail: the deadline is the last waiter's deadline + wait, or, for the first
-- waiter, now + the lock's PTTL + wait.
local ttl
local last = redis.call('lindex', KEYS[2], -1)
local last_timeout = false
if last ~= false and last ~= ARGV[2] then
  last_timeout = redis.call('zscore', KEYS[3], last)
end
if last_timeout ~= false then
  ttl = tonumber(last_timeout) - now
else
  ttl = redis.call('pttl', KEYS[1])
end
local timeout = ttl + tonumber(ARGV[3]) + now
if redis.call('zadd', KEYS[3], timeout, ARGV[2]) == 1 then
  redis.call('rpush', KEYS[2], ARGV[2])
end
return ttl
