-- lock_force_unlock.lua: delete a lock whoever holds it and wake its waiters.
--
-- Redisson's forceUnlockAsync, refusing keys that are not lock hashes (shapes.lua's lock_hash:
-- only the fields a lock has, with their values' shapes): a typo in a lock name must not
-- delete a user's data.
--
-- KEYS[1]  lock key
-- KEYS[2]  wake channel redisson_lock__channel:{name}
-- ARGV[1]  unlock message ('0')
-- ARGV[2]  the kind asked for: 'lock' (a plain or fair lock: a hash without a mode field) or
--          'rw' (a read-write lock: a hash with one)
--
-- Returns  {1, <owner field>...}: the lock existed and was deleted; the owner fields it held
--          (the holders, each '<client-id>:<owner>[:write]'), whose clients the caller then
--          tells (the holder's lost signal: see notice.rs)
--          {0}: it did not exist.
-- Errors   WRONGTYPE when KEYS[1] is not a hash, a hash with a field or value that no lock
--          has (shapes.lua's lock_hash), or a lock of another kind than ARGV[2] (kinds.lua's
--          wrong_kind); nothing deleted, nothing published.
-- Loops    once over the hash's fields (HGETALL): bounded by the key's own size.
--
-- Uses lock_hash from shapes.lua and wrong_kind from kinds.lua (joined in front by
-- scripts/mod.rs).

local reply, has_mode = lock_hash(KEYS[1])
if reply.err or reply[1] == 0 then
  return reply
end

if ARGV[2] == 'lock' and has_mode then
  return wrong_kind(KEYS[1], 'a plain or fair lock')
elseif ARGV[2] == 'rw' and not has_mode then
  return wrong_kind(KEYS[1], 'a read-write lock')
end

redis.call('del', KEYS[1])
publish(KEYS[2], ARGV[1])
return reply
