-- rw_read_renew.lua: renew read holds (watchdog batch or one extension): the lock hash and
-- each of the owner's read-hold keys. Unlike Redisson's read-lock renewal, which renews every
-- reader's holds, only the caller's own holds are renewed, so a crashed reader still expires.
--
-- KEYS[1]..KEYS[n]  lock keys (hashes)
-- ARGV[1]           lease in ms
-- ARGV[2i]          owner field for KEYS[i]
-- ARGV[2i+1]        that owner's read-hold prefix {<name>}:<owner>:rwlock_timeout
--
-- Returns  array of n integers: 1 renewed; -1 gone; -2 this owner has no read hold, or the
--          key now holds another type or another kind's hash (one such key must not stop the
--          rest of the batch).
-- Loops    once per key, and per key over the owner's read holds: at most MAX_READ_HOLDS
--          (1024) each.

-- The most read holds one owner may have (rw_read_acquire.lua refuses more).
local MAX_READ_HOLDS = 1024

local out = {}
for i, key in ipairs(KEYS) do
  local owner = ARGV[2 * i]
  -- The owner's read holds in a read-write lock's hash (mode field); a plain or fair lock's
  -- hash is another kind's, even with a field of that name.
  local reply = redis.pcall('hmget', key, owner, 'mode')
  local holds = not reply.err and reply[2] and tonumber(reply[1]) or nil
  if reply.err or (reply[1] and not reply[2]) then
    out[i] = -2
  elseif holds then
    local remain = redis.call('pttl', key)
    redis.call('pexpire', key, math.max(remain, tonumber(ARGV[1])))
    -- At most MAX_READ_HOLDS keys (rw_read_acquire.lua refuses more holds than that).
    for h = 1, math.min(holds, MAX_READ_HOLDS) do
      redis.call('pexpire', ARGV[2 * i + 1] .. ':' .. h, ARGV[1])
    end
    out[i] = 1
  elseif redis.call('exists', key) == 0 then
    out[i] = -1
  else
    out[i] = -2
  end
end
return out
