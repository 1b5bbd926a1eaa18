-- lock_acquire_fast.lua: the plain lock's common acquire, a free lock that nobody queues for,
-- in the least server work. Anything else is left to lock_acquire.lua, which the client
-- sends next when this one answers nil.
--
-- The grant is lock_acquire.lua's for a fresh owner (mode 'new') on a free lock, written
-- alike: the Redisson RLock hash with the hold count 1, the fencing token field and the
-- holder field, TTL = lease; the token is max(last + 1, server TIME in microseconds) of the
-- slot's counter (prelude.lua's next_token), here only when the counter holds a plain
-- decimal below the clock reading (the common case; no generation, no Redisson RFencedLock
-- counter).
--
-- KEYS[1]  lock key (hash; see lock_acquire.lua)
-- KEYS[2]  fencing counter of the lock's slot (string, same slot), as lock_acquire.lua's
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field <client-uuid>:<owner-id>, fresh for this request
-- ARGV[3]  the client's holder metadata '<app>;<host>;<pid>' (lock_acquire.lua's ARGV[6])
-- ARGV[4]  (absent when the floor is '0') the token floor of a new counter, as
--          lock_acquire.lua's ARGV[5] without a generation: given, a new counter is left to
--          lock_acquire.lua; absent, a new counter starts at the clock reading
--
-- Returns  the fencing token (a decimal string): granted with hold count 1, as
--          lock_acquire.lua's {1, 1, token}
--          nil: nothing was changed; send lock_acquire.lua. When the lock key, its hand-off
--          queue (distlock_lock_queue:{<key>}) or Redisson's RFencedLock counter
--          (redisson_lock_token:{<key>}) exists, or the slot counter is not a decimal integer
--          below the clock reading (ahead of it, a generation's, not a number) or is new while
--          ARGV[4] is given; the counter is put back as it was.
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
if redis.call('exists', key, 'distlock_lock_queue:' .. tag, 'redisson_lock_token:' .. tag) > 0 then
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
