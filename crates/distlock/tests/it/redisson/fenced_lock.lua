-- Redisson fixture: RedissonFencedLock.tryLockInnerAsync(leaseTime, unit, threadId), the
-- script behind RFencedLock.lockAndGetToken() / tryLockAndGetToken() (EVAL_LONG_LIST).
-- Redisson 4.7 (scripts unchanged since 3.52); present since 3.19.0. Written from the
-- behaviour of Redisson's source (read, not copied).
--
-- KEYS[1]  lock key: the lock name (hash, same as RLock's; the token is not stored in it)
-- KEYS[2]  token counter: prefixName("redisson_lock_token", name) = redisson_lock_token:{name}
--          (string, INCR; no TTL)
-- ARGV[1]  leaseMs: the explicit lease, or lockWatchdogTimeout (30000) with the watchdog
-- ARGV[2]  lockName: <uuid>:<threadId>
--
-- Returns  {-1, token}   acquired or re-entered; every grant, re-entries too, draws a token
--          {pttl, -1}    held by another owner

if (redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
  local token = redis.call('incr', KEYS[2])
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {-1, token}
end
return {redis.call('pttl', KEYS[1]), -1}
