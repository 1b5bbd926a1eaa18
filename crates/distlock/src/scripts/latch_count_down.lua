-- latch_count_down.lua: count a latch down by one; at zero delete it and wake every waiter
-- (Redisson's RedissonCountDownLatch.countDown), at most once per request.
--
-- The count goes down first (DECR refuses another type or a string that is no integer,
-- writing nothing), then the request's record is claimed, with the count left: the members
-- <request> (its number within its block plus one: 1 to 64) and -(<left> * 64 + <request>)
-- of the client's count-down records of the epoch in which the request was first sent (the
-- client takes the record at the first send) and of its block of its client's count-down
-- numbers (see semaphore_acquire.lua), added with the member 0 in one SADD, which answers 3
-- when it created the set (which then takes its TTL ARGV[1]) and 2 when it claimed the
-- record. Every member is an integer (Redis 7.0 keeps the set an intset) but for a count of
-- 2^40 or more, recorded as '<request>=<left>'. A resent request (its reply was lost, or its
-- first send is still on its way) finds the record taken, takes its own count member out
-- again when it added one, puts the count back and answers the first send's result, read
-- back from the set (SMEMBERS of one block's records). A claim the server refuses (a user
-- without +sadd or +pexpire, a record key of another type) puts the count back and takes back
-- what it added: nothing changes, and the refusal is the answer. A latch that is open (no
-- key) is counted down as Redisson's is (DECR to -1, deleted again) and recorded too. The
-- latch's channel, redisson_countdownlatch__channel__{<KEYS[1]>}, is named here, only when
-- the count reaches zero.
--
-- KEYS[1]  latch key (string count)
-- KEYS[2]  count-down records distlock_latch_count_downs:{<name>}:<client-id>:<epoch>:<block>
--          (set: 0, and per request applied <request> and its count member)
-- ARGV[1]  the TTL in ms KEYS[2] takes when this claim creates it
-- ARGV[2]  the request's member (its number within the block plus one)
--
-- Returns  the count left (0 when the latch opened or was already open).
-- Uses     wrong_kind from kinds.lua (joined in front by scripts/mod.rs).
-- Errors   'WRONGTYPE distlock: the key holds a <type> ..., not a count-down latch' when KEYS[1]
--          holds another type (a lock's hash, …); DECR's 'ERR value is not an integer or out
--          of range' when it holds a string that is no count; both before any write; the
--          record set's refusal (NOPERM, WRONGTYPE) as it is, with nothing changed.

local v = redis.pcall('decr', KEYS[1])
if type(v) == 'table' then
  -- Refused, nothing written. A resend whose first send ran answers that send's result
  -- (below).
  if redis.call('sismember', KEYS[2], ARGV[2]) == 0 then
    if string.sub(v.err, 1, 9) == 'WRONGTYPE' then
      return wrong_kind(KEYS[1], 'a count-down latch')
    end
    return v
  end
else
  local left = v > 0 and v or 0
  -- The count left, as a member paired with the request's: a negative number (formatted by
  -- the server, cheaper than in Lua), or '<request>=<left>' for a count too large for a
  -- double to hold exactly times the block.
  local mine
  if left < 1099511627776 then
    mine = -(left * 64 + ARGV[2])
  else
    mine = string.format('%s=%d', ARGV[2], left)
  end
  local added = redis.pcall('sadd', KEYS[2], '0', ARGV[2], mine)
  -- (Compared with numbers only: a refusal is a table, equal to none of them.)
  local refused
  if added ~= 2 and added ~= 0 and added ~= 1 and added ~= 3 then
    refused = added
  elseif added == 3 then
    refused = redis.pcall('pexpire', KEYS[2], ARGV[1])
    if type(refused) == 'table' then
      -- No TTL allowed: the set this claim made goes.
      if type(redis.pcall('del', KEYS[2])) == 'table' then
        redis.pcall('srem', KEYS[2], '0', ARGV[2], mine)
      end
    else
      refused = nil
    end
  end
  if not refused and added >= 2 then
    if v <= 0 then
      redis.call('del', KEYS[1])
      if v == 0 then
        -- A user without channel rights still counts down (waiters re-check every second).
        publish('redisson_countdownlatch__channel__{' .. KEYS[1] .. '}', '0')
      end
    end
    return left
  end
  -- Refused, or a resend (its first send counted down already): undo this count (-1: the key
  -- was missing or held 0, an open latch either way: no key; SET, not INCR, which the
  -- latch's ACL in the README does not grant).
  if v == -1 then
    redis.call('del', KEYS[1])
  else
    redis.call('set', KEYS[1], v + 1, 'keepttl')
  end
  if refused then
    return refused
  end
  if added == 1 then
    -- This send's own count, paired with a request already recorded: taken out again.
    redis.call('srem', KEYS[2], mine)
  end
end
-- The first send's result: its count member, -(left * 64 + request), or '<request>=<left>'.
local f = tonumber(ARGV[2])
local prefix = ARGV[2] .. '='
for _, m in ipairs(redis.call('smembers', KEYS[2])) do
  if string.sub(m, 1, #prefix) == prefix then
    return tonumber(string.sub(m, #prefix + 1))
  end
  local n = tonumber(m)
  if n and n < 0 then
    n = -n
    if (n - 1) % 64 + 1 == f then
      return (n - f) / 64
    end
  end
end
