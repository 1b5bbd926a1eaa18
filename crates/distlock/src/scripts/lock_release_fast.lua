-- lock_release_fast.lua: lock_release.lua's final release (key deleted, '0' published on
-- the wake channel) of an owner's only hold with nobody queued (no queued field in the hash:
-- it reads no queue), and nothing else; nil:
-- nothing changed, send lock_release.lua. First sends only (a resend needs the latch).
-- KEYS[1] lock key (hash)   ARGV[1] owner field
-- Returns 1 released, or nil when the owner holds other than one hold, the hash is a
--         read-write lock's, or it has the queued field (distlock:queued, see handoff.lua):
--         the hand-off queue may have a waiter, whom lock_release.lua hands the lock to.
-- Errors  WRONGTYPE before any write.

local key = KEYS[1]
local f = redis.call('hmget', key, ARGV[1], 'mode', 'distlock:queued')
if f[1] ~= '1' or f[2] or f[3] then
  return nil
end
-- The helper keys' hash tag, as `keys::prefixed` puts it after their prefix.
local tag = key
if not string.find(key, '{', 1, true) then
  tag = '{' .. key .. '}'
end
redis.call('del', key)
publish('redisson_lock__channel:' .. tag, '0')
return 1
