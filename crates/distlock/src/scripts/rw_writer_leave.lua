-- rw_writer_leave.lua: a waiting writer gives up (cancelled or timed out): leave the set of
-- waiting writers and the hand-off queue, give back a write hold a hand-off gave it meanwhile
-- (to the next queued writer, as a release would), and wake readers held back by it.
--
-- KEYS[1]  waiting writers distlock_rwlock_writers:{<name>}
-- KEYS[2]  wake channel redisson_rwlock:{<name>}
-- KEYS[3]  lock key (hash)
-- KEYS[4]  fencing counter of the lock's slot (for a hand-off's token)
-- KEYS[5]  hand-off queue distlock_rwlock_queue:{<name>} (zset; see rw_handoff.lua)
-- KEYS[6]  its writer entries distlock_rwlock_waiters:{<name>} (hash)
-- ARGV[1]  owner field
-- ARGV[2]  '1': the owner is a fresh one minted for the wait, so a write hold it has was
--          handed to it and nobody will use it: give it back (whole); '0': only leave
-- ARGV[3]  token floor of a hand-off, as rw_write_acquire.lua's ARGV[7]
--
-- Returns  1 when the owner was waiting or a hold was given back, else 0.
-- Errors   WRONGTYPE when a key holds another type.
--
-- Uses prelude.lua, handoff.lua and rw_handoff.lua (joined in front by scripts/mod.rs).

local removed = redis.call('zrem', KEYS[1], ARGV[1])
queue_helpers().dequeue(KEYS[5], KEYS[6], ARGV[1])
local field = ARGV[1] .. ':write'
if ARGV[2] == '1' and redis.call('hexists', KEYS[3], field) == 1 then
  redis.call('hdel', KEYS[3], field)
  rw_write_gone(KEYS[3], KEYS[2], '1', KEYS[4], ARGV[3], KEYS[5], KEYS[6], KEYS[1])
  return 1
end
if removed == 1 then
  -- pcall: a user without rights on the channel (NOPERM) still gets the
  -- result of what was done; waiters re-check on their own.
  publish(KEYS[2], '1')
end
return removed
