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
--          key now holds another type (one such key must not stop the rest of the batch).

local out = {}
for i, key in ipairs(KEYS) do
  local owner = ARGV[2 * i]
  local reply = redis.pcall('hget', key, owner)
  local holds = type(reply) == 'string' and tonumber(reply) or nil
  if type(reply) == 'table' then
    out[i] = -2
  elseif holds then
    local remain = redis.call('pttl', key)
    redis.call('pexpire', key, math.max(remain, tonumber(ARGV[1])))
    for h = 1, holds do
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
