-- semaphore_release.lua: give back k permits and wake waiters (Redisson's
-- RedissonSemaphore.release / addPermits), at most once per request.
--
-- Mode '0' (release): the request latch KEYS[3] records the result, so a resent request
-- (its reply was lost, or the server stalled past the client's timeout) answers the first
-- result instead of adding the permits twice.
-- Mode '1' (give back a grant of unknown outcome): KEYS[3] is the acquire's grant latch.
-- If the acquire ran, its permits are given back; if it has not run yet, a tombstone
-- 'undone:' is left so that it does nothing when it runs (semaphore_acquire.lua).
--
-- KEYS[1]  semaphore key (string: available permits)
-- KEYS[2]  channel redisson_sc:{<name>}
-- KEYS[3]  mode '0': release latch distlock_semaphore_release:{<name>}:<request-id>;
--          mode '1': grant latch distlock_semaphore_grant:{<name>}:<request-id>
-- KEYS[4]  mode '0', optional: the grant latch of the permits given back
--          (distlock_semaphore_grant:{<name>}:<request-id>), cut to the resend window
--          (ARGV[3]) instead of its ten latch lifetimes: once the caller knew of its grant no
--          resend of it comes, but a send of the acquire held up on its way (its resend was
--          granted first) may still arrive within the window, and must find its grant
--          recorded, not take the permits again for no one
-- ARGV[1]  permits k
-- ARGV[2]  mode: '0' release, '1' give back a grant of unknown outcome
-- ARGV[3]  latch TTL in ms (the resend window)
--
-- Returns  the permits available afterwards, or GONE (-1) when nothing was given back (mode '1':
--          the acquire never ran, or was given back already).
-- Errors   WRONGTYPE when KEYS[1] holds another type.

local prior = redis.call('get', KEYS[3])
if ARGV[2] == '1' then
  if prior == false then
    redis.call('set', KEYS[3], 'undone:', 'px', ARGV[3])
    return -1
  end
  if string.sub(prior, 1, 7) == 'undone:' then
    return -1
  end
  redis.call('set', KEYS[3], 'undone:' .. prior, 'px', ARGV[3])
elseif prior then
  return tonumber(prior)
end
local v = redis.call('incrby', KEYS[1], ARGV[1])
-- A user without channel rights still releases (waiters fall back to polling).
publish(KEYS[2], v)
if ARGV[2] == '0' then
  redis.call('set', KEYS[3], v, 'px', ARGV[3])
  if KEYS[4] then
    -- pcall: a user whose ACL lacks PEXPIRE leaves the latch to its own TTL.
    redis.pcall('pexpire', KEYS[4], ARGV[3])
  end
end
return v
