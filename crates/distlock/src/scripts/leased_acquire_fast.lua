-- leased_acquire_fast.lua: leased_acquire.lua's grant of an available permit to a permit id
-- never sent before (its request's first send) when nobody queues for a hand-off, and nothing
-- else; nil: nothing changed, send leased_acquire.lua.
-- KEYS[1] semaphore key <name> (string: available permits)
-- KEYS[2] leases {<name>}:timeout (zset: 16-byte permit id -> expiry, ms)
-- ARGV[1] permit id: 16 raw bytes   ARGV[2] lease in ms
-- Returns the lease's expiry in ms since the epoch, server time (as leased_acquire.lua's
--         {1, expiry_ms, lease_ms}: the whole lease), or nil when the count is not a positive
--         integer of at most 18 digits (absent, 0, below 0, another kind's data, a user's
--         string: the full script answers or refuses it), the hand-off queue or the leases key
--         of older distlock versions exists, or the id is leased already (a resend's full
--         script granted it first: it takes no second permit).
--         Redisson's reclaim of ended leases is left to the full scripts: a permit is available
--         without them, and an acquire that finds none runs leased_acquire.lua, which reclaims
--         them first (as permits() does, and every Redisson acquire).
-- Errors  WRONGTYPE when KEYS[2] holds another type (its ZADD, before any write).

local key = KEYS[1]
-- The helper keys' hash tag, as `keys::prefixed` puts it after their prefix.
local tag = key
if not string.find(key, '{', 1, true) then
  tag = '{' .. key .. '}'
end
if redis.call('exists', 'distlock_permit_queue:' .. tag, 'redisson__timeout__set:' .. tag) > 0 then
  return nil
end
local count = redis.pcall('get', key)
-- A count DECRBY takes (no sign, no leading zero, below 2^63) that is at least 1.
if type(count) ~= 'string' or #count > 18 or not string.find(count, '^[1-9]%d*$') then
  return nil
end
-- Server time in ms, as prelude.lua's now_ms (which this script does not join: its helpers
-- would cost more to define than the rest of this script).
local t = redis.call('time')
local expiry = t[1] * 1000 + math.floor(t[2] / 1000) + ARGV[2]
if redis.call('zadd', KEYS[2], 'NX', expiry, ARGV[1]) == 0 then
  return nil
end
redis.call('decrby', key, 1)
-- As Redisson, the leases live as long as the count when it has a TTL.
local ttl = redis.call('pttl', key)
if ttl > 0 then
  redis.call('pexpire', KEYS[2], ttl)
end
return expiry
