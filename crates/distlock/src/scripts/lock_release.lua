-- lock_release.lua: release one hold of a reentrant lock; wake a waiter on the last one.
--
-- The common case, the last hold with nobody queued, is lock_release_fast.lua's, sent
-- first; this script does it alike when that one answers nil or is not sent (a resend, a
-- lock handle that met contention lately).
--
-- Redisson's unlockInnerAsync. Redisson's unlock latch is written when holds remain,
-- where a resent request must not take a second hold away; the final release writes none
-- (a key created and expired per release costs more server time than the whole rest of the
-- script): a resend of it finds the lock gone or re-taken, and the client, knowing it resent,
-- counts that as released. Unlike Redisson it says why a release was refused (gone vs. held
-- by another owner) instead of returning nil.
--
-- KEYS[1]  lock key (hash)
-- KEYS[2]  wake channel redisson_lock__channel:{name}: the unlock message is '0' (wake
--          one waiter), as Redisson's UNLOCK_MESSAGE
-- KEYS[3]  unlock latch redisson_unlock_latch:{name}:<request-id>
-- KEYS[4]  fencing counter of the lock's slot (a hand-off issues the next waiter's token)
-- KEYS[5]  Redisson RFencedLock's token counter redisson_lock_token:{<key>}
-- KEYS[6]  direct hand-off queue distlock_lock_queue:{<key>} (zset; see handoff.lua)
-- KEYS[7]  its waiter entries distlock_lock_waiters:{<key>} (hash)
-- ARGV[1]  lease in milliseconds to apply when holds remain
-- ARGV[2]  owner field <client-uuid>:<owner-id>
-- ARGV[3]  latch TTL in milliseconds
-- ARGV[4]  token floor, as lock_acquire.lua's ARGV[5]
-- ARGV[5]  bound on re-takes (Handoff::Retakes): '' hands the lock to the first live waiter
--          at every final release; '<n>' not while fewer than n grants in a row passed the
--          queue's head (the lock is freed and the unlock message published instead)
--
-- Returns  1   the last hold was released: key deleted (with its token and holder fields),
--              then handed to the first live queued waiter (handoff.lua: no unlock message,
--              the lock stays held), or the unlock message published when none is queued
--              or a re-take is due (ARGV[5]) (no latch)
--          0   one hold released, others remain (TTL reset to ARGV[2]; the token and holder
--              fields stay)
--          -1  GONE: not held, the lock is gone
--          -2  HELD_BY_OTHER: not held, another owner holds it
-- Errors   WRONGTYPE when KEYS[1] holds another type; raised before any write.
--
-- Uses prelude.lua and handoff.lua (joined in front by scripts/mod.rs) for the hand-off.
-- Cost: the final release with nobody queued (the common one) runs GET (latch), HGET, DEL,
-- EXISTS (queue), PUBLISH and defines no queue helper.

local prior = redis.call('get', KEYS[3])
if prior then
  return tonumber(prior)
end
-- A read-write lock's hash (mode field) is another kind's: not held, nothing touched.
local f = redis.call('hmget', KEYS[1], ARGV[2], 'mode')
local holds = f[1]
if holds == false or f[2] then
  if redis.call('exists', KEYS[1]) == 0 then
    return -1
  end
  return -2
end
if tonumber(holds) > 1 then
  -- TTL first: if the server refuses it (ACL), no hold has been taken away yet.
  redis.call('pexpire', KEYS[1], ARGV[1])
  redis.call('hincrby', KEYS[1], ARGV[2], -1)
  redis.call('set', KEYS[3], 0, 'px', ARGV[3])
  return 0
end
redis.call('del', KEYS[1])
if hand_off(KEYS[1], KEYS[4], ARGV[4], KEYS[5], KEYS[6], KEYS[7], ARGV[5]) then
  return 1
end
-- pcall: a user without rights on the channel (NOPERM) still gets the
-- result of what was done; waiters re-check on their own.
publish(KEYS[2], '0')
return 1
