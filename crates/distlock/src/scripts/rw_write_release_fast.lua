-- rw_write_release_fast.lua: the read-write lock's common write release, the owner's last
-- hold with no read hold of its own and nobody queued, in the least server work. Anything
-- else is left to rw_write_release.lua, which the client sends next when this one answers
-- nil. Sent only as the first send of a release request: a resend goes to
-- rw_write_release.lua, whose latch answers it.
--
-- The release is rw_write_release.lua's final one: the key deleted, Redisson's
-- READ_UNLOCK_MESSAGE '1' published on redisson_rwlock:{<key>} (every waiter wakes), no latch.
--
-- KEYS[1]  lock key (hash)
-- ARGV[1]  the owner's write field <client-uuid>:<owner-id>:write
--
-- Returns  1    the last write hold was released (as rw_write_release.lua's 1 with nobody
--               queued)
--          nil  nothing was changed; send rw_write_release.lua: the hash is not in write
--               mode, the owner does not hold exactly one write hold, it holds read holds
--               too, or the hand-off queue distlock_rwlock_queue:{<key>} exists
-- Errors   WRONGTYPE when KEYS[1] holds another type; raised before any write.
--
-- Cost: HMGET, HLEN, EXISTS, DEL, PUBLISH; builds two key names.

local key = KEYS[1]
local f = redis.call('hmget', key, 'mode', ARGV[1])
if f[1] ~= 'write' or f[2] ~= '1' or redis.call('hlen', key) ~= 2 then
  return nil
end
-- The helper keys' hash tag, as keys.rs's `prefixed` puts it after their prefix.
local tag = key
if not string.find(key, '{', 1, true) then
  tag = '{' .. key .. '}'
end
if redis.call('exists', 'distlock_rwlock_queue:' .. tag) == 1 then
  return nil
end
redis.call('del', key)
publish('redisson_rwlock:' .. tag, '1')
return 1
