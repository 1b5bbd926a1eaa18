-- latch_count_down.lua: count a latch down by one; at zero delete it and wake every waiter
-- (Redisson's RedissonCountDownLatch.countDown), at most once per request.
--
-- KEYS[1]  latch key (string count)
-- KEYS[2]  channel redisson_countdownlatch__channel__{<name>}
-- KEYS[3]  request latch distlock_latch_count_down:{<name>}:<request-id>: the result, so a
--          resent request answers it instead of counting down twice
-- ARGV[1]  zero-count message ('0')
-- ARGV[2]  request latch TTL in ms (the resend window)
--
-- Returns  the count left (0 when the latch opened or was already open).
-- Uses     wrong_kind from kinds.lua (joined in front by scripts/mod.rs).
-- Errors   'WRONGTYPE distlock: the key holds a <type> ..., not a count-down latch' when KEYS[1]
--          holds another type (a lock's hash, …), before any write.

local prior = redis.call('get', KEYS[3])
if prior then
  return tonumber(prior)
end
local count = redis.pcall('get', KEYS[1])
if type(count) == 'table' then
  -- Not a count: another kind's data (a lock's hash, …), refused before any write.
  return wrong_kind(KEYS[1], 'a count-down latch')
end
if count == false then
  return 0
end
local v = redis.call('decr', KEYS[1])
if v <= 0 then
  redis.call('del', KEYS[1])
  -- A user without channel rights still counts down (waiters re-check every second).
  publish(KEYS[2], ARGV[1])
  v = 0
end
redis.call('set', KEYS[3], v, 'px', ARGV[2])
return v
