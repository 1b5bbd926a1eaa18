-- rw_read_release.lua: release one read hold (Redisson's RedissonReadLock unlock, with the
-- unlock latch (Redisson's redisson_unlock_latch) and not-held codes). When the lock is freed,
-- it is handed to the first live queued distlock writer (rw_handoff.lua), or, with nobody
-- queued, the waiters are woken.
--
-- KEYS[1]  lock key (hash)
-- KEYS[2]  wake channel redisson_rwlock:{<name>}
-- KEYS[3]  this owner's read-hold prefix {<name>}:<owner>:rwlock_timeout
-- KEYS[4]  read-hold prefix of the lock {<name>}
-- KEYS[5]  unlock latch redisson_unlock_latch:{<name>}:<request-id>
-- KEYS[6]  fencing counter of the lock's slot (for a hand-off's token)
-- KEYS[7]  hand-off queue distlock_rwlock_queue:{<name>} (zset; see rw_handoff.lua)
-- KEYS[8]  its writer entries distlock_rwlock_waiters:{<name>} (hash)
-- KEYS[9]  waiting writers distlock_rwlock_writers:{<name>} (zset)
-- ARGV[1]  unlock message ('0')
-- ARGV[2]  owner field
-- ARGV[3]  latch TTL in ms
-- ARGV[4]  token floor of a hand-off, as rw_write_acquire.lua's ARGV[7]
--
-- The final release writes no unlock latch (as lock_release.lua's): a resend of it finds the
-- lock gone or re-taken and is reported as unconfirmed, and no record outlives the lock.
--
-- Returns  1 the lock was freed (key deleted; handed to a queued writer or waiters woken);
--          0 other holds remain; GONE (-1); HELD_BY_OTHER (-2): this
--          owner has no read hold.
-- Errors   WRONGTYPE when KEYS[1] holds another type (before any write). A hash without a
--          mode field (a plain or fair lock's) is another kind's: -2, nothing touched.
-- Loops    over the hash's fields (bounded by its size), and per reader over its newest read
--          holds' TTL keys: at most MAX_READ_HOLDS (1024) per reader, the most
--          rw_read_acquire.lua grants. Only readers' hold counts are walked: 'mode' and
--          writers' '<owner>:write' fields are skipped, and a value that is not a whole number
--          in 1..2^31 is never taken for a count (a fencing token of another kind's hash once
--          made this loop run for days).
--
-- Uses prelude.lua, handoff.lua and rw_handoff.lua (joined in front by scripts/mod.rs).

-- The most read holds one owner may have (rw_read_acquire.lua refuses more).
local MAX_READ_HOLDS = 1024

local prior = redis.call('get', KEYS[5])
if prior then return tonumber(prior) end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
  if redis.call('exists', KEYS[1]) == 1 then return -2 end
  return -1
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then return -2 end
local counter = redis.call('hincrby', KEYS[1], ARGV[2], -1)
if counter == 0 then
  redis.call('hdel', KEYS[1], ARGV[2])
end
redis.call('del', KEYS[3] .. ':' .. (counter + 1))
if redis.call('hlen', KEYS[1]) > 1 then
  local max_remain = -3
  local fields = redis.call('hkeys', KEYS[1])
  for _, field in ipairs(fields) do
    local holds
    if field ~= 'mode' and string.sub(field, -6) ~= ':write' then
      holds = tonumber(redis.call('hget', KEYS[1], field))
    end
    if holds and holds >= 1 and holds <= 2147483647 and holds == math.floor(holds) then
      for i = holds, math.max(1, holds - MAX_READ_HOLDS + 1), -1 do
        local remain = redis.call('pttl', KEYS[4] .. ':' .. field .. ':rwlock_timeout:' .. i)
        max_remain = math.max(remain, max_remain)
      end
    end
  end
  if max_remain > 0 then
    redis.call('pexpire', KEYS[1], max_remain)
    redis.call('set', KEYS[5], 0, 'px', ARGV[3])
    return 0
  end
  if mode == 'write' then
    redis.call('set', KEYS[5], 0, 'px', ARGV[3])
    return 0
  end
end
redis.call('del', KEYS[1])
if not rw_hand_off(KEYS[1], KEYS[6], ARGV[4], KEYS[7], KEYS[8], KEYS[9]) then
  publish(KEYS[2], ARGV[1])
end
return 1
