-- fair_acquire_fast.lua: the fair lock's common acquire, a free lock with nobody queued, in
-- the least server work. Anything else is left to fair_acquire.lua, which the client sends
-- next when this one answers nil.
--
-- The grant is fair_acquire.lua's for a fresh owner (mode 'new') on a free lock with an empty
-- queue, written alike: the Redisson RFairLock hash with the hold count 1, the fencing token
-- field and the holder field, TTL = lease; the token as lock_acquire_fast.lua's.
--
-- KEYS[1]  lock key (hash; see fair_acquire.lua)
-- KEYS[2]  fencing counter of the lock's slot (string, same slot)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field <client-uuid>:<owner-id>, fresh for this request
-- ARGV[3]  the client's holder metadata '<app>;<host>;<pid>' (fair_acquire.lua's ARGV[9])
-- ARGV[4]  (absent when it is '0') the floor, as lock_acquire_fast.lua's ARGV[4]
--
-- Returns  the fencing token (a string, as next_token's): granted with hold count 1, as
--          fair_acquire.lua's {1, 1, token}
--          nil: nothing was changed; send fair_acquire.lua. When the lock key, Redisson's queue
--          (redisson_lock_queue:{<key>}) or its waiter scores (redisson_lock_timeout:{<key>})
--          exists, or fast_token finds the counter in another state (as
--          lock_acquire_fast.lua's); the counter is put back as it was.
-- Errors   A refused PEXPIRE (e.g. NOPERM) is answered as an error, with the new key deleted
--          again.
--
-- Uses fast_token from fast.lua (joined in front by scripts/mod.rs).
-- Cost: EXISTS, TIME, SET..GET, HSET, PEXPIRE; builds two key names and two strings.

local key = KEYS[1]
-- The helper keys' hash tag, as keys.rs's `prefixed` puts it after their prefix.
local tag = key
if not string.find(key, '{', 1, true) then
  tag = '{' .. key .. '}'
end
if redis.call('exists', key, 'redisson_lock_queue:' .. tag, 'redisson_lock_timeout:' .. tag) > 0 then
  return nil
end
local token, secs = fast_token(KEYS[2], ARGV[4])
if not token then
  return nil
end
redis.call('hset', key, ARGV[2], 1, 'distlock:fencing-token', token, 'distlock:holder',
  ARGV[3] .. ';' .. secs)
local r = redis.pcall('pexpire', key, ARGV[1])
if type(r) == 'table' then
  -- Refused (e.g. NOPERM): a lock without a TTL would outlive its holder.
  redis.call('del', key)
  return r
end
return token
