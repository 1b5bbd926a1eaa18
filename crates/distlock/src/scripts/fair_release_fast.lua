-- fair_release_fast.lua: the fair lock's common release, the last hold with nobody queued, in
-- the least server work. Anything else is left to fair_release.lua, which the client sends
-- next when this one answers nil. Sent only as the first send of a release request: a resend
-- goes to fair_release.lua, whose latch answers it.
--
-- The release is fair_release.lua's final one with an empty queue: the key deleted (with its
-- token and holder fields), no message (a fair lock wakes only its queue's head, as Redisson's
-- RFairLock), no latch.
--
-- KEYS[1]  lock key (hash)
-- ARGV[1]  owner field <client-uuid>:<owner-id>
--
-- Returns  1    the last hold was released (as fair_release.lua's 1 with nobody queued)
--          nil  nothing was changed; send fair_release.lua: the owner does not hold exactly
--               one hold, the hash is a read-write lock's (a mode field), or Redisson's queue
--               redisson_lock_queue:{<key>} exists
-- Errors   WRONGTYPE when KEYS[1] holds another type; raised before any write.
--
-- Cost: HMGET, EXISTS, DEL; builds one key name.

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
if redis.call('exists', 'redisson_lock_queue:' .. tag) == 1 then
  return nil
end
redis.call('del', key)
return 1
