-- fair_leave.lua: take a waiter out of a fair lock's queue (cancelled or timed out: as
-- Redisson's acquireFailed, the scores behind it move up by its wait), giving back a
-- hand-off that raced it, then, if the lock is free, hand it to the head waiter or wake it
-- (fair.lua's serve_head); or force-unlock: as Redisson's RedissonFairLock forceUnlockAsync,
-- the lock is deleted and left free, dead heads dropped and the live head only woken (no
-- hand-off: an operator clearing a stuck lock finds it free, even when the head waiter's
-- process is dead; the woken head takes the lock by its own attempt).
--
-- KEYS[1]  lock key (hash)
-- KEYS[2]  queue redisson_lock_queue:{name}
-- KEYS[3]  scores redisson_lock_timeout:{name}
-- KEYS[4]  liveness distlock_fair_liveness:{name}
-- KEYS[5]  fencing counter of the lock's slot (a hand-off issues the head's token)
-- KEYS[6]  hand-off entries distlock_fair_waiters:{name} (hash; see fair.lua)
-- ARGV[1]  owner leaving the queue ('' for none)
-- ARGV[2]  '1' to delete the lock first (force unlock); 'give-back': the owner is a fresh
--          one minted for the wait, so a hold it has was handed to it and nobody will use it:
--          delete the lock if the owner holds it; '0' otherwise
-- ARGV[3]  wake channel prefix redisson_lock__channel:{name}
-- ARGV[4]  the leaving waiter's whole wait in ms (as it was queued with; 0 for none)
-- ARGV[5]  token floor, as fair_acquire.lua's ARGV[7]
--
-- Returns  1 when the lock was deleted (a hold given back) or the owner was queued, else 0.
--          Force unlock: {1, <owner field>...} when the lock was deleted, with the owner
--          fields it held (as lock_force_unlock.lua's), {0} when there was none (then nobody
--          is woken).
-- Errors   WRONGTYPE when a key holds another type. Force unlock: WRONGTYPE, nothing changed,
--          when KEYS[1] is not a hash, a hash with a field or value no lock has (shapes.lua's
--          lock_hash, as lock_force_unlock.lua's), or a read-write lock's (kinds.lua's
--          wrong_kind).
--
-- Uses prelude.lua, kinds.lua, shapes.lua, handoff.lua and fair.lua (joined in front by
-- scripts/mod.rs): now_ms, wrong_kind, lock_hash, leave_queue, drop_stale_heads, serve_head.

local result = 0
if ARGV[2] == '1' then
  -- Force unlock: only a plain or fair lock's hash is deleted, never another kind's data
  -- nor a user's (checked before anything is written).
  local reply, has_mode = lock_hash(KEYS[1])
  if reply.err or reply[1] == 0 then
    return reply
  end
  if has_mode then
    return wrong_kind(KEYS[1], 'a fair lock')
  end
  redis.call('del', KEYS[1])
  drop_stale_heads(KEYS[2], KEYS[3], KEYS[4], KEYS[6], now_ms())
  local head = redis.call('lindex', KEYS[2], 0)
  if head then
    publish(ARGV[3] .. ':' .. head, 0)
  end
  return reply
elseif ARGV[2] == 'give-back' and redis.call('hexists', KEYS[1], ARGV[1]) == 1 then
  result = redis.call('del', KEYS[1])
end
if ARGV[1] ~= '' then
  if leave_queue(KEYS[2], KEYS[3], KEYS[4], KEYS[6], ARGV[1], tonumber(ARGV[4])) == 1 then
    result = 1
  end
end
if redis.call('exists', KEYS[1]) == 0 then
  drop_stale_heads(KEYS[2], KEYS[3], KEYS[4], KEYS[6], now_ms())
  serve_head(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[6], KEYS[5], ARGV[5], ARGV[3], true)
end
return result
