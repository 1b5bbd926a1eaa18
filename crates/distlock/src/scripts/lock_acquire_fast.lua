-- lock_acquire_fast.lua: lock_acquire.lua's grant to a fresh owner of a free plain lock that
-- nobody queues for, and nothing else; nil: nothing changed, send lock_acquire.lua.
-- KEYS[1] lock key (hash)   KEYS[2] the slot's fencing counter
-- ARGV[1] lease ms   ARGV[2] owner field   ARGV[3] holder '<app>;<host>;<pid>'
-- ARGV[4] the client's estimate of this server's clock in microseconds ('': none: TIME)
-- ARGV[5] the counter's floor, as lock_acquire.lua's ARGV[5] (absent when '0')
-- Returns the token (as lock_acquire.lua's {1, 1, token}), or nil when the key, the hand-off
--         queue or Redisson's RFencedLock counter exists, or fast_token (fast.lua) declines.
-- Errors  a refused PEXPIRE, the new key deleted again.

local key = KEYS[1]
-- The helper keys' hash tag, as `keys::prefixed` puts it after their prefix.
local tag = key
if not string.find(key, '{', 1, true) then
  tag = '{' .. key .. '}'
end
if redis.call('exists', key, 'distlock_lock_queue:' .. tag, 'redisson_lock_token:' .. tag) > 0 then
  return nil
end
local token, secs = fast_token(KEYS[2], ARGV[5], ARGV[4])
if not token then
  return nil
end
redis.call('hset', key, ARGV[2], 1, 'distlock:fencing-token', token, 'distlock:holder',
  ARGV[3] .. ';' .. secs)
local r = redis.pcall('pexpire', key, ARGV[1])
if type(r) == 'table' then
  -- Refused (e.g. NOPERM): a lock without a TTL would outlive its holder.
  redis.call('del', key)
  return r
end
return token
