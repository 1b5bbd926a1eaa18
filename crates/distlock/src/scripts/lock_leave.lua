-- lock_leave.lua: a waiter of a plain lock leaves the direct hand-off queue (its wait elapsed
-- or its acquire was cancelled), giving back a hand-off that raced it.
--
-- KEYS[1]  lock key (hash)
-- KEYS[2]  wake channel redisson_lock__channel:{<key>}
-- KEYS[3]  fencing counter of the lock's slot (for a hand-off to the next waiter)
-- KEYS[4]  Redisson RFencedLock's token counter redisson_lock_token:{<key>}
-- KEYS[5]  queue distlock_lock_queue:{<key>} (zset; see handoff.lua)
-- KEYS[6]  waiter entries distlock_lock_waiters:{<key>} (hash)
-- ARGV[1]  owner field <client-uuid>:<owner-id> of the waiter
-- ARGV[2]  '1': the owner is a fresh one minted for the wait, so a hold it has was handed to
--          it and nobody will use it: give it back (whole); '0': only leave the queue
-- ARGV[3]  token floor, as lock_acquire.lua's ARGV[5]
--
-- The lock hash's queued field (handoff.lua) is deleted when the queue is left empty.
--
-- Returns  1  a hold was given back: the lock went to the next live waiter (handoff.lua), or
--             was deleted and the unlock message ('0', as Redisson's) published when none
--             is left
--          0  nothing held: only the queue was left
-- Errors   WRONGTYPE when a key holds another type.
--
-- Uses prelude.lua and handoff.lua (joined in front by scripts/mod.rs).

queue_helpers().dequeue(KEYS[5], KEYS[6], ARGV[1])
if redis.call('exists', KEYS[5]) == 0 then
  -- Nobody left queued: the holder's release may take its fast path again (handoff.lua's
  -- queued field). pcall: a key of another type has no such field.
  redis.pcall('hdel', KEYS[1], QUEUED_FIELD)
end
if ARGV[2] == '1' and redis.call('hexists', KEYS[1], ARGV[1]) == 1 then
  redis.call('del', KEYS[1])
  if not hand_off(KEYS[1], KEYS[3], ARGV[3], KEYS[4], KEYS[5], KEYS[6], '') then
    publish(KEYS[2], '0')
  end
  return 1
end
return 0
