-- lock_acquire_fast.lua: the plain lock's common acquire, a free lock that nobody queues for,
-- in the least server work. Anything else is left to lock_acquire.lua, which the client
-- sends next when this one answers nil.
--
-- The grant is lock_acquire.lua's for a fresh owner (mode 'new') on a free lock, written
-- alike: the Redisson RLock hash with the hold count 1, the fencing token field and the
-- holder field, TTL = lease; the token is max(last + 1, server TIME in microseconds) of the
-- slot's counter (prelude.lua's next_token), here only in its common case (fast.lua's
-- fast_token): the counter below the clock reading, of this generation on Sentinel and
-- written by this node on a Cluster; no Redisson RFencedLock counter.
--
-- KEYS[1]  lock key (hash; see lock_acquire.lua)
-- KEYS[2]  fencing counter of the lock's slot (string, same slot), as lock_acquire.lua's
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field <client-uuid>:<owner-id>, fresh for this request
-- ARGV[3]  the client's holder metadata '<app>;<host>;<pid>' (lock_acquire.lua's ARGV[6])
-- ARGV[4]  (absent when it is '0') lock_acquire.lua's ARGV[5], the token floor of a new
--          counter ('<floor>'), or with a generation ('<generation>:<floor>' on Sentinel,
--          'cluster:<floor>' on a Cluster): given, a new counter is left to lock_acquire.lua;
--          absent, a new counter starts at the clock reading
--
-- Returns  the fencing token (a string, as next_token's): granted with hold count 1, as
--          lock_acquire.lua's {1, 1, token}
--          nil: nothing was changed; send lock_acquire.lua. When the lock key, its hand-off
--          queue (distlock_lock_queue:{<key>}) or Redisson's RFencedLock counter
--          (redisson_lock_token:{<key>}) exists, or fast_token finds the counter in another
--          state (ahead of the clock, another generation's or node's, not a token, new with
--          a floor in generation 0); the counter is put back as it was.
-- Errors   A refused PEXPIRE (e.g. NOPERM) is answered as an error, with the new key deleted
--          again.
--
-- Uses fast_token from fast.lua (joined in front by scripts/mod.rs).
-- Cost: EXISTS, TIME, SET..GET, HSET, PEXPIRE; builds two key names and two strings. With a
-- generation GET and SET in place of SET..GET; on a Cluster also INFO replication.

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
