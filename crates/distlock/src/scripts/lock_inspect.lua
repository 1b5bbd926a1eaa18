-- lock_inspect.lua: one owner's view of a lock, read-only.
--
-- KEYS[1]  lock key
-- ARGV[1]  owner field
-- ARGV[2]  name of the token field
--
-- Returns  {hold_count, fencing_token, pttl}
--          hold_count: this owner's holds (0: not held by this owner)
--          fencing_token: the holder's token as a decimal string (0 when free)
--          pttl: ms left (-2 key absent, -1 no TTL)
--          {HELD_BY_OTHER} (-2) when another owner holds it and this owner does not
-- Errors   WRONGTYPE when KEYS[1] holds another type.

local pttl = redis.call('pttl', KEYS[1])
if pttl == -2 then
  return {0, 0, -2}
end
local count = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '0')
if count == 0 then
  return {-2}
end
return {count, redis.call('hget', KEYS[1], ARGV[2]) or '0', pttl}
