-- fair_release.lua: release one hold of a fair lock; on the last, wake the head waiter.
--
-- Redisson's RedissonFairLock unlock (publish to the next waiter's own channel) with
-- Redisson's unlock latch for resends, and dead heads removed first (fair.lua).
--
-- KEYS[1]  lock key (hash)
-- KEYS[2]  queue redisson_lock_queue:{name}
-- KEYS[3]  timeouts redisson_lock_timeout:{name}
-- KEYS[4]  unlock latch redisson_unlock_latch:{name}:<request-id>
-- KEYS[5]  liveness distlock_fair_liveness:{name}
-- ARGV[1]  unlock message ('0')
-- ARGV[2]  lease in ms for remaining holds
-- ARGV[3]  owner field
-- ARGV[4]  latch TTL in ms
-- ARGV[5]  wake channel prefix redisson_lock__channel:{name}
--
-- Returns  1 released (key deleted with its token and holder fields, head woken); 0 holds
--          remain (the token and holder fields stay); -1 gone; -2 another owner.
-- Errors   WRONGTYPE when KEYS[1] holds another type (before any write).
--
-- Uses now_ms from prelude.lua and drop_stale_heads from fair.lua (joined in front by
-- scripts/mod.rs).

local prior = redis.call('get', KEYS[4])
if prior then
  return tonumber(prior)
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
  if redis.call('exists', KEYS[1]) == 0 then
    return -1
  end
  return -2
end
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if counter > 0 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  redis.call('set', KEYS[4], 0, 'px', ARGV[4])
  return 0
end
redis.call('del', KEYS[1])
drop_stale_heads(KEYS[2], KEYS[3], KEYS[5], now_ms())
local head = redis.call('lindex', KEYS[2], 0)
if head ~= false then
  -- pcall: a user without rights on the channel (NOPERM) still gets the
  -- result of what was done; waiters re-check on their own.
  publish(ARGV[5] .. ':' .. head, ARGV[1])
end
redis.call('set', KEYS[4], 1, 'px', ARGV[4])
return 1
