-- semaphore_release.lua: give back k permits and wake waiters (Redisson's
-- RedissonSemaphore.release / addPermits), at most once per request.
--
-- The request latch KEYS[3] is claimed first (SET NX), so a resent request (its reply was
-- lost, or the server stalled past the client's timeout, or its first send arrives after
-- it) finds it taken and adds nothing. A key of another type, or a string that is no count,
-- refuses INCRBY, and the claim is taken back in the same run: nothing changes. (A grant of
-- unknown outcome is given back by semaphore_give_back.lua.)
--
-- KEYS[1]  semaphore key (string: available permits)
-- KEYS[2]  channel redisson_sc:{<name>}
-- KEYS[3]  request latch distlock_semaphore_release:{<name>}:<request-id> (string k, PX)
-- KEYS[4]  optional: the grant latch of the permits given back
--          (distlock_semaphore_grant:{<name>}:<request-id>), cut to the resend window
--          (ARGV[2]) instead of its ten latch lifetimes: once the caller knew of its grant no
--          resend of it comes, but a send of the acquire held up on its way (its resend was
--          granted first) may still arrive within the window, and must find its grant
--          recorded, not take the permits again for no one
-- ARGV[1]  permits k
-- ARGV[2]  latch TTL in ms (the resend window)
--
-- Returns  the permits available afterwards (to a resend: the permits available now).
-- Errors   WRONGTYPE when KEYS[1] holds another type; 'ERR value is not an integer or out of
--          range' when it holds a string that is no count; nothing is changed.

if not redis.call('set', KEYS[3], ARGV[1], 'nx', 'px', ARGV[2]) then
  -- A resend: the first send gave the permits back.
  local now = redis.pcall('get', KEYS[1])
  return type(now) == 'string' and tonumber(now) or 0
end
local v = redis.pcall('incrby', KEYS[1], ARGV[1])
if type(v) == 'table' then
  -- Not a count: the claim goes too, and the refusal is the answer (pcall: a user whose
  -- ACL lacks DEL, as the README's semaphore user, leaves the claim to its TTL).
  redis.pcall('del', KEYS[3])
  return v
end
-- A user without channel rights still releases (waiters fall back to polling).
publish(KEYS[2], v)
if KEYS[4] then
  -- pcall: a user whose ACL lacks PEXPIRE leaves the latch to its own TTL.
  redis.pcall('pexpire', KEYS[4], ARGV[2])
end
return v
