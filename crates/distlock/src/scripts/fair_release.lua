-- fair_release.lua: release one hold of a fair lock; on the last, hand the lock to the head
-- waiter or wake it.
--
-- Redisson's RedissonFairLock unlock (publish to the next waiter's own channel) with
-- Redisson's unlock latch for resends, and dead heads removed first (fair.lua). A head that
-- takes direct hand-offs (a distlock waiter: an entry in the waiters hash) is granted the
-- lock by this script and told on its client's grant channel instead (fair.lua's
-- serve_head), so it holds the lock when the message arrives.
--
-- KEYS[1]  lock key (hash)
-- KEYS[2]  queue redisson_lock_queue:{name}
-- KEYS[3]  timeouts redisson_lock_timeout:{name}
-- KEYS[4]  unlock latch redisson_unlock_latch:{name}:<request-id>
-- KEYS[5]  liveness distlock_fair_liveness:{name}
-- KEYS[6]  fencing counter of the lock's slot (a hand-off issues the head's token)
-- KEYS[7]  hand-off entries distlock_fair_waiters:{name} (hash; see fair.lua)
-- ARGV[1]  lease in ms for remaining holds
-- ARGV[2]  owner field
-- ARGV[3]  latch TTL in ms
-- ARGV[4]  wake channel prefix redisson_lock__channel:{name}
-- ARGV[5]  token floor, as fair_acquire.lua's ARGV[7]
--
-- The final release writes no unlock latch (as lock_release.lua's): a resend of it finds the
-- lock gone or re-taken and is reported as unconfirmed, and no record outlives the lock.
--
-- Returns  1 released (key deleted with its token and holder fields; then handed to the head
--          or the head woken with '0', as Redisson's UNLOCK_MESSAGE); 0 holds remain (the
--          token and holder fields stay); GONE (-1); HELD_BY_OTHER (-2).
-- Errors   WRONGTYPE when KEYS[1] holds another type (before any write).
--
-- Uses prelude.lua, handoff.lua and fair.lua (joined in front by scripts/mod.rs): now_ms,
-- drop_stale_heads, serve_head.

local prior = redis.call('get', KEYS[4])
if prior then
  return tonumber(prior)
end
-- A read-write lock's hash (mode field) is another kind's: not held, nothing touched.
local f = redis.call('hmget', KEYS[1], ARGV[2], 'mode')
if f[1] == false or f[2] then
  if redis.call('exists', KEYS[1]) == 0 then
    return -1
  end
  return -2
end
local counter = redis.call('hincrby', KEYS[1], ARGV[2], -1)
if counter > 0 then
  redis.call('pexpire', KEYS[1], ARGV[1])
  redis.call('set', KEYS[4], 0, 'px', ARGV[3])
  return 0
end
redis.call('del', KEYS[1])
-- No latch: the final release leaves no record (see the header).
drop_stale_heads(KEYS[2], KEYS[3], KEYS[5], KEYS[7], now_ms())
serve_head(KEYS[1], KEYS[2], KEYS[3], KEYS[5], KEYS[7], KEYS[6], ARGV[5], ARGV[4], true)
return 1
