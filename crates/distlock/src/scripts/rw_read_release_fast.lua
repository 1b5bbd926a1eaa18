-- rw_read_release_fast.lua: the read-write lock's common read release, the only reader's
-- last hold with nobody queued, in the least server work. Anything else is left to
-- rw_read_release.lua, which the client sends next when this one answers nil. Sent only as
-- the first send of a release request: a resend goes to rw_read_release.lua, whose latch
-- answers it.
--
-- The release is rw_read_release.lua's final one: the key and the hold's timeout key
-- ({<key>}:<owner>:rwlock_timeout:1) deleted, Redisson's UNLOCK_MESSAGE '0' published on
-- redisson_rwlock:{<key>}, no latch.
--
-- KEYS[1]  lock key (hash)
-- ARGV[1]  owner field <client-uuid>:<owner-id>
--
-- Returns  1    the last read hold was released (as rw_read_release.lua's 1 with nobody
--               queued)
--          nil  nothing was changed; send rw_read_release.lua: the hash is not in read mode,
--               the owner does not hold exactly one read hold, another owner holds the lock
--               too, or the hand-off queue distlock_rwlock_queue:{<key>} exists
-- Errors   WRONGTYPE when KEYS[1] holds another type; raised before any write.
--
-- Cost: HMGET, HLEN, EXISTS, DEL, PUBLISH; builds three key names.

local key = KEYS[1]
local f = redis.call('hmget', key, 'mode', ARGV[1])
if f[1] ~= 'read' or f[2] ~= '1' or redis.call('hlen', key) ~= 2 then
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
redis.call('del', key, tag .. ':' .. ARGV[1] .. ':rwlock_timeout:1')
publish('redisson_rwlock:' .. tag, '0')
return 1
