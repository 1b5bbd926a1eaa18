-- rw_write_release_fast.lua: rw_write_release.lua's final release (key deleted, '1'
-- published: every waiter wakes) of an owner's only write hold, no read hold of its own and
-- nobody queued, and nothing else; nil: nothing changed, send rw_write_release.lua. First
-- sends only.
-- KEYS[1] lock key (hash)   ARGV[1] the owner's write field <owner>:write
-- Returns 1 released, or nil when the hash is not in write mode, the owner holds other than
--         one write hold or read holds too, or the writers' hand-off queue exists.
-- Errors  WRONGTYPE before any write.

local key = KEYS[1]
local f = redis.call('hmget', key, 'mode', ARGV[1])
if f[1] ~= 'write' or f[2] ~= '1' or redis.call('hlen', key) ~= 2 then
  return nil
end
-- The helper keys' hash tag, as `keys::prefixed` puts it after their prefix.
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
