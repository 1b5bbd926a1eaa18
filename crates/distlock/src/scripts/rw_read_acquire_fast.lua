-- rw_read_acquire_fast.lua: rw_read_acquire.lua's read grant to a fresh owner of a free lock
-- with no writer waiting or queued, and nothing else; nil: nothing changed, send
-- rw_read_acquire.lua.
-- KEYS[1] lock key (hash)   KEYS[2] the slot's fencing counter
-- ARGV[1] lease ms   ARGV[2] owner field
-- ARGV[3] the counter's floor, as lock_acquire.lua's ARGV[5] (absent when '0')
-- Returns the token (as rw_read_acquire.lua's {1, 1, token}), or nil when the key, the
--         waiting writers or the writers' hand-off queue exist, or fast_token (fast.lua)
--         declines.
-- Errors  a refused PEXPIRE, the new key deleted again.

local key = KEYS[1]
-- The helper keys' hash tag, as `keys::prefixed` puts it after their prefix.
local tag = key
if not string.find(key, '{', 1, true) then
  tag = '{' .. key .. '}'
end
if redis.call('exists', key, 'distlock_rwlock_writers:' .. tag,
    'distlock_rwlock_queue:' .. tag) > 0 then
  return nil
end
local token = fast_token(KEYS[2], ARGV[3])
if not token then
  return nil
end
redis.call('hset', key, 'mode', 'read', ARGV[2], 1)
local r = redis.pcall('pexpire', key, ARGV[1])
if type(r) == 'table' then
  -- Refused (e.g. NOPERM): a lock without a TTL would outlive its holder.
  redis.call('del', key)
  return r
end
redis.call('set', tag .. ':' .. ARGV[2] .. ':rwlock_timeout:1', 1, 'px', ARGV[1])
return token
