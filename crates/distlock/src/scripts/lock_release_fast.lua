-- lock_release_fast.lua: lock_release.lua's final release (key deleted, '0' published on
-- the wake channel) of an owner's only hold with nobody queued, and nothing else; nil:
-- nothing changed, send lock_release.lua. First sends only (a resend needs the latch).
-- KEYS[1] lock key (hash)   ARGV[1] owner field
-- Returns 1 released, or nil when the owner holds other than one hold, the hash is a
--         read-write lock's, or the hand-off queue exists.
-- Errors  WRONGTYPE before any write.

local key = KEYS[1]
local f = redis.call('hmget', key, ARGV[1], 'mode')
if f[1] ~= '1' or f[2] then
  return nil
end
-- The helper keys' hash tag, as `keys::prefixed` puts it after their prefix.
local tag = key
if not string.find(key, '{', 1, true) then
  tag = '{' .. key .. '}'
end
if redis.call('exists', 'distlock_lock_queue:' .. tag) == 1 then
  return nil
end
redis.call('del', key)
publish('redisson_lock__channel:' .. tag, '0')
return 1
