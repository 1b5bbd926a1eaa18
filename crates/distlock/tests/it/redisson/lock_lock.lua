-- Redisson fixture: RedissonLock.tryLockInnerAsync(waitTime, leaseTime, unit, threadId,
-- command), the script behind RLock.lock() / tryLock() (EVAL_LONG).
-- Redisson 4.7 (scripts unchanged since 3.52); one if-block since 3.19.0. Written from the
-- behaviour of Redisson's source (read, not copied).
--
-- KEYS[1]  lock key: the lock name (hash, field lockName -> hold count)
-- ARGV[1]  leaseMs: the explicit lease, or lockWatchdogTimeout (30000) with the watchdog
-- ARGV[2]  lockName: <ServiceManager.id uuid>:<threadId>
--
-- Returns  nil   acquired (or re-entered: hold count + 1), lease reset
--          pttl  held by another owner: PTTL of the lock key in ms

if (redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
return redis.call('pttl', KEYS[1])
