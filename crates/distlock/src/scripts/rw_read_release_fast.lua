-- rw_read_release_fast.lua: rw_read_release.lua's final release (key and the hold's timeout
-- key deleted, '0' published) of the only reader's only hold with nobody queued, and nothing
-- else; nil: nothing changed, send rw_read_release.lua. First sends only.
-- KEYS[1] lock key (hash)   ARGV[1] owner field
-- Returns 1 released, or nil when the hash is not in read mode, the owner holds other than
--         one hold, another owner holds too, or the writers' hand-off queue exists.
-- Errors  WRONGTYPE before any write.

local key = KEYS[1]
local f = redis.call('hmget', key, 'mode', ARGV[1])
if f[1] ~= 'read' or f[2] ~= '1' or redis.call('hlen', key) ~= 2 then
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
redis.call('del', key, tag .. ':' .. ARGV[1] .. ':rwlock_timeout:1')
publish('redisson_rwlock:' .. tag, '0')
return 1
