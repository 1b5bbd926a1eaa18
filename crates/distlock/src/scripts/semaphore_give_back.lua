-- semaphore_give_back.lua: give back the permits of a semaphore acquire whose outcome its
-- caller does not know (it gave up waiting for the answer, or the grant was not confirmed by
-- the replicas), at most once, through the acquire's grant record.
--
-- If the acquire ran (its member is in the grant records), its permits are given back; either
-- way the tombstone u<request> is added, and the request's member too, so that an acquire
-- that has not run yet (still on its way, or queued on a stalled server) does nothing when it
-- runs (semaphore_acquire.lua answers CANCELLED). A resend finds the tombstone and gives back
-- nothing again. The set keeps at least ARGV[3] ms of TTL (raised when it has less, or was
-- created here).
--
-- KEYS[1]  semaphore key (string: available permits)
-- KEYS[2]  channel redisson_sc:{<name>}
-- KEYS[3]  the acquire's grant records
--          distlock_semaphore_grants:{<name>}:<client-id>:<epoch>:<block> (set)
-- ARGV[1]  permits k
-- ARGV[2]  the acquire's member (its number within the block)
-- ARGV[3]  the TTL in ms KEYS[3] keeps at least (as long as the grant records live)
--
-- Returns  the permits available afterwards, or GONE (-1) when nothing was given back (the
--          acquire never ran, or was given back already).
-- Errors   WRONGTYPE when KEYS[1] holds another type.

if redis.call('sismember', KEYS[3], 'u' .. ARGV[2]) == 1 then
  return -1
end
local ran = redis.call('sadd', KEYS[3], ARGV[2]) == 0
redis.call('sadd', KEYS[3], 't', 'u' .. ARGV[2])
if redis.call('pttl', KEYS[3]) < tonumber(ARGV[3]) then
  redis.call('pexpire', KEYS[3], ARGV[3])
end
if not ran then
  return -1
end
local v = redis.call('incrby', KEYS[1], ARGV[1])
-- A user without channel rights still gives back (waiters fall back to polling).
publish(KEYS[2], v)
return v
