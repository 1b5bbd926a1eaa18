-- fair_release_fast.lua: fair_release.lua's final release (key deleted, no message: a fair
-- lock wakes only its queue's head) of an owner's only hold with nobody queued, and nothing
-- else; nil: nothing changed, send fair_release.lua. First sends only.
-- KEYS[1] lock key (hash)   ARGV[1] owner field
-- Returns 1 released, or nil when the owner holds other than one hold, the hash is a
--         read-write lock's, or Redisson's queue exists.
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
if redis.call('exists', 'redisson_lock_queue:' .. tag) == 1 then
  return nil
end
redis.call('del', key)
return 1
