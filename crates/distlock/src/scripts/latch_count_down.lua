-- latch_count_down.lua: count a latch down by one; at zero delete it and wake every waiter
-- (Redisson's RedissonCountDownLatch.countDown), at most once per request.
--
-- The count goes down first (DECR refuses another type or a string that is no integer,
-- writing nothing), then the request's record is claimed, with the count left: the members
-- <request> and <request>=<left> of the client's count-down records of the epoch in which the
-- request began and of its block of request numbers (see semaphore_acquire.lua), added with
-- the member 't' in one SADD, which answers 3 when it created the set (which then takes its
-- TTL ARGV[1]) and 2 when it claimed the record. A resent request (its reply was lost, or its
-- first send is still on its way) finds the record taken, takes its own <request>=<left> out
-- again when it added one, puts the count back and answers the first send's result. A latch
-- that is open (no key) is counted down as Redisson's is (DECR to -1, deleted again) and
-- recorded too.
--
-- KEYS[1]  latch key (string count)
-- KEYS[2]  channel redisson_countdownlatch__channel__{<name>}
-- KEYS[3]  count-down records distlock_latch_count_downs:{<name>}:<client-id>:<epoch>:<block>
--          (set: 't', and per request applied <request> and <request>=<the count left>)
-- ARGV[1]  the TTL in ms KEYS[3] takes when this claim creates it
-- ARGV[2]  the request's member (its number within the block)
--
-- Returns  the count left (0 when the latch opened or was already open).
-- Uses     wrong_kind from kinds.lua, recorded_left from records.lua (joined in front by
--          scripts/mod.rs).
-- Errors   'WRONGTYPE distlock: the key holds a <type> ..., not a count-down latch' when KEYS[1]
--          holds another type (a lock's hash, …); DECR's 'ERR value is not an integer or out
--          of range' when it holds a string that is no count; both before any write.

local v = redis.pcall('decr', KEYS[1])
if type(v) == 'table' then
  -- Refused, nothing written. A resend whose first send ran answers that send's result.
  if redis.call('sismember', KEYS[3], ARGV[2]) == 1 then
    return recorded_left(KEYS[3], ARGV[2])
  end
  if string.sub(v.err, 1, 9) == 'WRONGTYPE' then
    return wrong_kind(KEYS[1], 'a count-down latch')
  end
  return v
end
local left = v > 0 and v or 0
-- The count left, as a member paired with the request's: a negative number (formatted by
-- the server, cheaper than in Lua), or '<request>=<left>' for a count too large for a
-- double to hold exactly times the block.
local mine
if left < 1099511627776 then
  mine = -(left * 64 + tonumber(ARGV[2]) + 1)
else
  mine = string.format('%s=%d', ARGV[2], left)
end
local added = redis.call('sadd', KEYS[3], 't', ARGV[2], mine)
if added < 2 then
  -- A resend: its first send counted down already. Undo this one (-1: the key was missing
  -- or held 0, an open latch either way: no key; SET, not INCR, which the latch's ACL in
  -- the README does not grant) and answer the first result.
  if added == 1 then
    -- This send's own count, paired with a request already recorded: taken out again.
    redis.call('srem', KEYS[3], mine)
  end
  if v == -1 then
    redis.call('del', KEYS[1])
  else
    redis.call('set', KEYS[1], v + 1, 'keepttl')
  end
  return recorded_left(KEYS[3], ARGV[2])
end
if added == 3 then
  redis.call('pexpire', KEYS[3], ARGV[1])
end
if v <= 0 then
  redis.call('del', KEYS[1])
  if v == 0 then
    -- A user without channel rights still counts down (waiters re-check every second).
    publish(KEYS[2], '0')
  end
end
return left
