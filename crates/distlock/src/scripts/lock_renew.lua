-- lock_renew.lua: renew the leases of many held locks of one kind in one call (the
-- watchdog's batch). One lock (LockGuard::extend, a batch of one) is lock_renew_one.lua's.
--
-- Redisson's renewExpirationAsync over n locks at once, which RedissonWriteLock also uses
-- for its '<owner>:write' field; here each hash is first checked to be the caller's kind.
--
-- KEYS[1]..KEYS[n]  lock keys (hashes; all in one slot on Redis Cluster)
-- ARGV[1]       lease in milliseconds
-- ARGV[2]       the kind renewed: '' a plain or fair lock (a hash without a mode field),
--               'write' a read-write lock's write hold (a hash whose mode is 'write')
-- ARGV[3..n+2]  owner field of KEYS[i] is ARGV[i+2] ('<owner>:write' for a write hold)
--
-- Returns  array of n integers:  1  renewed (PEXPIRE applied)
--                                 -1 not held: the lock is gone
--                                 -2 not held: another owner holds it, or the key now
--                                    holds another type or another kind's hash (one such
--                                    key must not stop the renewal of the others in the
--                                    batch)
-- Loops    once per key: bounded by the number of KEYS.

local out = {}
local mode = ARGV[2]
for i, key in ipairs(KEYS) do
  -- The owner's field, in a hash of the kind asked for: a plain or fair lock's has no mode
  -- field, a write hold's hash has mode 'write' (a read-write lock read-held, or a plain
  -- lock's hash, is another kind's, even with a field of that name).
  local held = redis.pcall('hmget', key, ARGV[i + 2], 'mode')
  if held.err or (held[2] or '') ~= mode then
    out[i] = -2
  elseif held[1] then
    redis.call('pexpire', key, ARGV[1])
    out[i] = 1
  elseif redis.call('exists', key) == 0 then
    out[i] = -1
  else
    out[i] = -2
  end
end
return out
