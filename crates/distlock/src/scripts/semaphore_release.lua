-- semaphore_release.lua: give back k permits and wake waiters (Redisson's
-- RedissonSemaphore.release / addPermits), at most once per request.
--
-- The request's record (the member ARGV[2] of the client's release records of the epoch in
-- which the request began and of its block of request numbers; see semaphore_acquire.lua) is
-- claimed first (SADD, with the member 't' that says whether this claim created the set, which
-- then takes its TTL ARGV[3]), so a resent request (its reply was lost, or the server stalled
-- past the client's timeout, or its first send arrives after it) finds it taken and adds
-- nothing. A key of another type, or a string that is no count, refuses INCRBY, and the claim
-- is taken back in the same run: nothing changes. (A grant of unknown outcome is given back by
-- semaphore_give_back.lua.) The grant's own record is left to its set's TTL: a send of the
-- acquire held up on its way (its resend was granted first) may still arrive, and must find
-- its grant recorded, not take the permits again for no one.
--
-- KEYS[1]  semaphore key (string: available permits)
-- KEYS[2]  channel redisson_sc:{<name>}
-- KEYS[3]  release records distlock_semaphore_releases:{<name>}:<client-id>:<epoch>:<block>
--          (set: 't', the requests applied)
-- ARGV[1]  permits k
-- ARGV[2]  the request's member (its number within the block)
-- ARGV[3]  the TTL in ms KEYS[3] takes when this claim creates it
--
-- Returns  the permits available afterwards (to a resend: the permits available now).
-- Errors   WRONGTYPE when KEYS[1] holds another type; 'ERR value is not an integer or out of
--          range' when it holds a string that is no count; nothing is changed.

local added = redis.call('sadd', KEYS[3], 't', ARGV[2])
if added == 0 then
  -- A resend: the first send gave the permits back.
  local now = redis.pcall('get', KEYS[1])
  return type(now) == 'string' and tonumber(now) or 0
end
if added == 2 then
  redis.call('pexpire', KEYS[3], ARGV[3])
end
local v = redis.pcall('incrby', KEYS[1], ARGV[1])
if type(v) == 'table' then
  -- Not a count: the claim goes too (with the set, when the claim made it), and the
  -- refusal is the answer.
  if added == 2 then
    redis.call('srem', KEYS[3], 't', ARGV[2])
  else
    redis.call('srem', KEYS[3], ARGV[2])
  end
  return v
end
-- A user without channel rights still releases (waiters fall back to polling).
publish(KEYS[2], v)
return v
