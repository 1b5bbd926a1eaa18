-- lock_renew.lua: renew the leases of many held locks in one call (the watchdog's batch),
-- or extend one (LockGuard::extend).
--
-- Redisson's renewExpirationAsync over n locks at once.
--
-- KEYS[1]..KEYS[n]  lock keys (hashes; all in one slot on Redis Cluster)
-- ARGV[1]       lease in milliseconds
-- ARGV[2..n+1]  owner field of KEYS[i] is ARGV[i+1]
--
-- Returns  array of n integers:  1  renewed (PEXPIRE applied)
--                                 -1 not held: the lock is gone
--                                 -2 not held: another owner holds it, or the key now
--                                    holds another type (one such key must not stop the
--                                    renewal of the others in the batch), or a
--                                    read-write lock's hash
-- Loops    once per key: bounded by the number of KEYS.

local out = {}
for i, key in ipairs(KEYS) do
  -- The owner's field in a plain or fair lock's hash; a read-write lock's hash (mode field)
  -- is another kind's, even with a field of that name.
  local held = redis.pcall('hmget', key, ARGV[i + 1], 'mode')
  if held.err or held[2] then
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
