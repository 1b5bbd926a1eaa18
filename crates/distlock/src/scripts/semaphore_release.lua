-- semaphore_release.lua: give back k permits and wake waiters (Redisson's
-- RedissonSemaphore.release / addPermits), at most once per request.
--
-- The request's record (the member ARGV[2] of the client's release records of the epoch in
-- which the request was first sent and of its block of its client's release numbers; see
-- semaphore_acquire.lua) is claimed first (SADD, with the member 0 that says whether this
-- claim created the set, which then takes its TTL ARGV[3]), so a resent request (its reply
-- was lost, or the server stalled past the client's timeout, or its first send arrives after
-- it) finds it taken and adds nothing. The client takes the record (its epoch, its number)
-- at the request's first send, not when the request is built: a release built long before it
-- is sent (in the background, at shutdown) names the set of the epoch it is sent in, whose
-- TTL covers every send of it. A key of another type, or a string that is no count, refuses
-- INCRBY, and the claim is taken back in the same run: nothing changes; a refused claim (a
-- user without +sadd or +pexpire, a record key of another type) changes nothing either. (A
-- grant of unknown outcome is given back by semaphore_give_back.lua.) The grant's own record
-- is left to its set's TTL: a send of the acquire held up on its way (its resend was granted
-- first) may still arrive, and must find its grant recorded, not take the permits again for
-- no one.
--
-- KEYS[1]  semaphore key (string: available permits)
-- KEYS[2]  channel redisson_sc:{<name>}
-- KEYS[3]  release records distlock_semaphore_releases:{<name>}:<client-id>:<epoch>:<block>
--          (set: 0, the requests applied)
-- ARGV[1]  permits k
-- ARGV[2]  the request's member (its number within the block plus one)
-- ARGV[3]  the TTL in ms KEYS[3] takes when this claim creates it
--
-- Returns  the permits available afterwards (to a resend: the permits available now).
-- Errors   WRONGTYPE when KEYS[1] holds another type; 'ERR value is not an integer or out of
--          range' when it holds a string that is no count; the record set's refusal (NOPERM,
--          WRONGTYPE) as it is; nothing is changed.

local added = redis.pcall('sadd', KEYS[3], '0', ARGV[2])
if added == 0 then
  -- A resend: the first send gave the permits back.
  local now = redis.pcall('get', KEYS[1])
  return type(now) == 'string' and tonumber(now) or 0
end
-- (Compared with numbers only: a refusal is a table, equal to none of them.)
if added ~= 1 and added ~= 2 then
  -- The claim was refused, writing nothing.
  return added
end
local v
if added == 2 then
  v = redis.pcall('pexpire', KEYS[3], ARGV[3])
  if type(v) ~= 'table' then
    v = nil
  end
end
v = v or redis.pcall('incrby', KEYS[1], ARGV[1])
if type(v) == 'table' then
  -- Not a count, or no TTL allowed: the claim goes too (with the set, when the claim made
  -- it), and the refusal is the answer.
  if added == 2 then
    if type(redis.pcall('srem', KEYS[3], '0', ARGV[2])) == 'table' then
      redis.pcall('del', KEYS[3])
    end
  else
    redis.pcall('srem', KEYS[3], ARGV[2])
  end
  return v
end
-- A user without channel rights still releases (waiters fall back to polling).
publish(KEYS[2], v)
return v
