-- lock_renew_one.lua: renew one held lock's lease: LockGuard::extend, and the watchdog's
-- renewal of a lock that is alone in its batch. lock_renew.lua for one key, answered with an
-- integer instead of an array (a table reply costs the server more than the rest of the
-- renewal).
--
-- Redisson's renewExpirationAsync (HEXISTS of the owner's field, PEXPIRE), with the hash
-- first checked to be the caller's kind. It wakes nobody, so it runs without publish.lua
-- (whose helper every run would define).
--
-- KEYS[1]  lock key (a hash)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  the owner's field ('<owner>:write' for a write hold)
-- ARGV[3]  the kind renewed: absent for a plain or fair lock (a hash without a mode field),
--          'write' for a read-write lock's write hold (a hash whose mode is 'write')
--
-- Returns  1  renewed (PEXPIRE applied)
--          GONE (-1) not held: the lock is gone
--          HELD_BY_OTHER (-2) not held: another owner holds it, or the key now holds another
--          type or another kind's hash
-- Loops    none.

-- The owner's field, in a hash of the kind asked for: a plain or fair lock's has no mode
-- field, a write hold's hash has mode 'write' (a read-write lock read-held, or a plain lock's
-- hash, is another kind's, even with a field of that name). pcall: a key of another type
-- answers an error table, which holds neither.
local held = redis.pcall('hmget', KEYS[1], ARGV[2], 'mode')
if held[1] and held[2] == (ARGV[3] or false) then
  redis.call('pexpire', KEYS[1], ARGV[1])
  return 1
end
if held.err or held[1] or held[2] or redis.call('exists', KEYS[1]) == 1 then
  return -2
end
return -1
