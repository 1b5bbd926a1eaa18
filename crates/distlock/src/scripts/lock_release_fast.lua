-- lock_release_fast.lua: the plain lock's common release, the last hold with nobody queued,
-- in the least server work. Anything else is left to lock_release.lua, which the client
-- sends next when this one answers nil. Sent only as the first send of a release request:
-- a resend goes to lock_release.lua, whose latch answers it.
--
-- The release is lock_release.lua's final one: the key deleted (with its token and holder
-- fields), the unlock message '0' published on redisson_lock__channel:{<key>} (Redisson's
-- UNLOCK_MESSAGE: one waiter wakes), no latch.
--
-- KEYS[1]  lock key (hash)
-- ARGV[1]  owner field <client-uuid>:<owner-id>
--
-- Returns  1    the last hold was released (as lock_release.lua's 1 with nobody queued)
--          nil  nothing was changed; send lock_release.lua: the owner does not hold exactly
--               one hold, the hash is a read-write lock's (a mode field), or the hand-off
--               queue distlock_lock_queue:{<key>} exists
-- Errors   WRONGTYPE when KEYS[1] holds another type; raised before any write.
--
-- Cost: HMGET, EXISTS, DEL, PUBLISH; builds two key names.

local key = KEYS[1]
local f = redis.call('hmget', key, ARGV[1], 'mode')
if f[1] ~= '1' or f[2] then
  return nil
end
-- The helper keys' hash tag, as keys.rs's `prefixed` puts it after their prefix.
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
