-- latch_count_down.lua: count a latch down by one; at zero delete it and wake every waiter
-- (Redisson's RedissonCountDownLatch.countDown), at most once per request.
--
-- The count goes down first (DECR refuses another type or a string that is no integer,
-- writing nothing), then the request latch is claimed with SET NX, holding the count left:
-- a resent request (its reply was lost, or its first send is still on its way) finds the
-- latch taken, puts the count back and answers the first send's result. A latch that is open
-- (no key) is counted down as Redisson's is (DECR to -1, deleted again) and recorded too.
--
-- KEYS[1]  latch key (string count)
-- KEYS[2]  channel redisson_countdownlatch__channel__{<name>}
-- KEYS[3]  request latch distlock_latch_count_down:{<name>}:<request-id>: the count left
-- ARGV[1]  request latch TTL in ms (the resend window)
--
-- Returns  the count left (0 when the latch opened or was already open).
-- Uses     wrong_kind from kinds.lua (joined in front by scripts/mod.rs).
-- Errors   'WRONGTYPE distlock: the key holds a <type> ..., not a count-down latch' when KEYS[1]
--          holds another type (a lock's hash, …); DECR's 'ERR value is not an integer or out
--          of range' when it holds a string that is no count; both before any write.

local v = redis.pcall('decr', KEYS[1])
if type(v) == 'table' then
  -- Refused, nothing written. A resend whose first send ran answers that send's result.
  local prior = redis.call('get', KEYS[3])
  if prior then
    return tonumber(prior)
  end
  if string.sub(v.err, 1, 9) == 'WRONGTYPE' then
    return wrong_kind(KEYS[1], 'a count-down latch')
  end
  return v
end
local left = v > 0 and v or 0
if not redis.call('set', KEYS[3], left, 'nx', 'px', ARGV[1]) then
  -- A resend: its first send counted down already. Undo this one (-1: the key was missing
  -- or held 0, an open latch either way: no key; SET, not INCR, which the latch's ACL in
  -- the README does not grant) and answer the first result.
  if v == -1 then
    redis.call('del', KEYS[1])
  else
    redis.call('set', KEYS[1], v + 1, 'keepttl')
  end
  return tonumber(redis.call('get', KEYS[3]))
end
if v <= 0 then
  redis.call('del', KEYS[1])
  if v == 0 then
    -- A user without channel rights still counts down (waiters re-check every second).
    publish(KEYS[2], '0')
  end
end
return left
