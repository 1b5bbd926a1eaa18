-- fair_leave.lua: take a waiter out of a fair lock's queue (cancelled or timed out: as
-- Redisson's acquireFailed, the scores behind it move up by its wait), or force-unlock; then
-- wake the head waiter if the lock is free.
--
-- KEYS[1]  lock key (hash)
-- KEYS[2]  queue redisson_lock_queue:{name}
-- KEYS[3]  scores redisson_lock_timeout:{name}
-- KEYS[4]  liveness distlock_fair_liveness:{name}
-- ARGV[1]  owner leaving the queue ('' for none)
-- ARGV[2]  '1' to delete the lock first (force unlock), '0' otherwise
-- ARGV[3]  wake channel prefix redisson_lock__channel:{name}
-- ARGV[4]  the leaving waiter's whole wait in ms (as it was queued with; 0 for none)
--
-- Returns  1 when the lock was deleted (force) or the owner was queued, else 0.
-- Errors   WRONGTYPE when a key holds another type.
--
-- Uses leave_queue from fair.lua (joined in front by scripts/mod.rs).

local result = 0
if ARGV[2] == '1' then
  result = redis.call('del', KEYS[1])
end
if ARGV[1] ~= '' then
  if leave_queue(KEYS[2], KEYS[3], KEYS[4], ARGV[1], tonumber(ARGV[4])) == 1 then
    result = 1
  end
end
if redis.call('exists', KEYS[1]) == 0 then
  local head = redis.call('lindex', KEYS[2], 0)
  if head ~= false then
    -- pcall: a user without rights on the channel (NOPERM) still gets the
    -- result of what was done; waiters re-check on their own.
    publish(ARGV[3] .. ':' .. head, 0)
  end
end
return result
