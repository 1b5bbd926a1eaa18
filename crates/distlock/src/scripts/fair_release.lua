-- fair_release.lua: release one hold of a fair lock; on the last, wake the head waiter.
--
-- Redisson's RedissonFairLock unlock (publish to the next waiter's own channel) with the
-- Redisson's unlock latch for resends, and stale-head removal by server time.
--
-- KEYS[1]  lock key (hash)
-- KEYS[2]  queue redisson_lock_queue:{name}
-- KEYS[3]  timeouts redisson_lock_timeout:{name}
-- KEYS[4]  unlock latch redisson_unlock_latch:{name}:<request-id>
-- ARGV[1]  unlock message ('0')
-- ARGV[2]  lease in ms for remaining holds
-- ARGV[3]  owner field
-- ARGV[4]  latch TTL in ms
-- ARGV[5]  wake channel prefix redisson_lock__channel:{name}
--
-- Returns  1 released (key deleted, head woken); 0 holds remain; -1 gone; -2 another owner.
-- Errors   WRONGTYPE when KEYS[1] holds another type (before any write).
--
-- Uses now_ms from prelude.lua (joined in front by scripts/mod.rs).

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
local now = now_ms()
while true do
  local first = redis.call('lindex', KEYS[2], 0)
  if first == false then break end
  local deadline = redis.call('zscore', KEYS[3], first)
  if deadline ~= false and tonumber(deadline) > now then
    -- pcall: a user without rights on the channel (NOPERM) still gets the
    -- result of what was done; waiters re-check on their own.
    redis.pcall('publish', ARGV[5] .. ':' .. first, ARGV[1])
    break
  end
  redis.call('lpop', KEYS[2])
  redis.call('zrem', KEYS[3], first)
end
redis.call('set', KEYS[4], 1, 'px', ARGV[4])
return 1
