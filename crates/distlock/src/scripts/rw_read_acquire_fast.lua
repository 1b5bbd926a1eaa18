-- rw_read_acquire_fast.lua: the read-write lock's common read acquire, a free lock with no
-- waiting or queued writer, in the least server work. Anything else is left to
-- rw_read_acquire.lua, which the client sends next when this one answers nil.
--
-- The grant is rw_read_acquire.lua's for a fresh owner (mode 'new') on a free lock, written
-- alike: Redisson's RReadWriteLock hash with mode 'read' and the owner's field at 1, TTL =
-- lease, and Redisson's timeout key of that read hold ({<key>}:<owner>:rwlock_timeout:1,
-- TTL = lease); the token as next_token issues it, here only in its common case (fast.lua's
-- fast_token, as lock_acquire_fast.lua's).
--
-- KEYS[1]  lock key (hash; see rw_read_acquire.lua)
-- KEYS[2]  fencing counter of the lock's slot (string, same slot)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field <client-uuid>:<owner-id>, fresh for this request
-- ARGV[3]  (absent when it is '0') the floor, as lock_acquire_fast.lua's ARGV[4]
--
-- Returns  the fencing token (a string, as next_token's): granted with hold count 1, as
--          rw_read_acquire.lua's {1, 1, token}
--          nil: nothing was changed; send rw_read_acquire.lua. When the lock key, its
--          waiting writers (distlock_rwlock_writers:{<key>}) or its hand-off queue
--          (distlock_rwlock_queue:{<key>}) exists, or fast_token finds the counter in another
--          state (as lock_acquire_fast.lua's); the counter is put back as it was.
-- Errors   A refused PEXPIRE (e.g. NOPERM) is answered as an error, with the new key deleted
--          again.
--
-- Uses fast_token from fast.lua (joined in front by scripts/mod.rs).
-- Cost: EXISTS, TIME, SET..GET, HSET, PEXPIRE, SET; builds three key names.

local key = KEYS[1]
-- The helper keys' hash tag, as keys.rs's `prefixed` puts it after their prefix.
local tag = key
if not string.find(key, '{', 1, true) then
  tag = '{' .. key .. '}'
end
if redis.call('exists', key, 'distlock_rwlock_writers:' .. tag,
    'distlock_rwlock_queue:' .. tag) > 0 then
  return nil
end
local token = fast_token(KEYS[2], ARGV[3])
if not token then
  return nil
end
redis.call('hset', key, 'mode', 'read', ARGV[2], 1)
local r = redis.pcall('pexpire', key, ARGV[1])
if type(r) == 'table' then
  -- Refused (e.g. NOPERM): a lock without a TTL would outlive its holder.
  redis.call('del', key)
  return r
end
redis.call('set', tag .. ':' .. ARGV[2] .. ':rwlock_timeout:1', 1, 'px', ARGV[1])
return token
