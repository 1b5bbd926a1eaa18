-- rw_read_acquire.lua: take a read hold of a read-write lock (Redisson RedissonReadLock
-- layout), write-preferring.
--
-- Layout: hash <name> with field 'mode' ('read'|'write'), field <owner> -> read holds,
-- field <owner>:write -> write holds; one string per read hold,
-- {<name>}:<owner>:rwlock_timeout:<n>, with the hold's lease, so a crashed reader's holds
-- expire on their own. distlock addition: zset distlock_rwlock_writers:{<name>} of waiting
-- writers (owner -> liveness deadline, server ms). While a live writer waits, new readers
-- are refused (re-entrant reads are not, to avoid deadlock): readers cannot starve writers.
--
-- KEYS[1]  lock key (hash)
-- KEYS[2]  this owner's read-hold prefix {<name>}:<owner>:rwlock_timeout
-- KEYS[3]  waiting writers distlock_rwlock_writers:{<name>}
-- KEYS[4]  fencing counter of the lock's slot (string): <prefix>distlock:fencing-counter:{<tag>}
-- ARGV[1]  lease in ms
-- ARGV[2]  owner field
-- ARGV[3]  owner's write field <owner>:write
-- ARGV[4]  mode: 'new' (fresh owner; a resend answers the same grant) | 'nested' (re-entry)
-- ARGV[5]  token floor of a new counter (decimal; see prelude.lua's next_token)
--
-- Returns  {1, read_holds, fencing_token}  granted (every grant draws a fresh token); the
--                                           token as a decimal string (exact up to 2^63 - 1)
--          {0, wait_ms}                     not granted (lock PTTL; -2: a writer waits)
--          {GONE} / {HELD_BY_OTHER}         'nested': gone / not held by this owner
-- Errors   WRONGTYPE when KEYS[1] holds another type, or a hash without a mode field (a plain
--          or fair lock's): 'WRONGTYPE distlock: the key holds …' (kinds.lua's wrong_kind),
--          before any write.
--          'ERR distlock: fencing counter ...' when the counter cannot issue a token, and a
--          refused PEXPIRE (e.g. NOPERM): nothing granted (expired waiting writers may have been
--          dropped).
--          'ERR distlock: this owner already holds 1024 read holds ...' for a re-entry past
--          MAX_READ_HOLDS (nothing written): 'ERR distlock-limit: …', which the client
--          reports as InvalidInput.
--
-- Uses now_ms, next_token and expire_or_undo from prelude.lua (joined in front by scripts/mod.rs).

-- The most read holds one owner may have: each has a TTL key that renewals and releases
-- walk, so their loops stay bounded (rw_read_renew.lua, rw_read_release.lua).
local MAX_READ_HOLDS = 1024

local now = now_ms()
-- A hash without a mode field is a plain or fair lock (Redisson RLock layout): refused before
-- anything is written (its hold counts and token are not read holds).
local f = redis.pcall('hmget', KEYS[1], 'mode', ARGV[2], ARGV[3])
if f.err or (f[1] == false and redis.call('exists', KEYS[1]) == 1) then
  return wrong_kind(KEYS[1], 'a read-write lock')
end
local mode, reading, writing = f[1], f[2] ~= false, f[3] ~= false
redis.call('zremrangebyscore', KEYS[3], '-inf', now)

if ARGV[4] == 'new' and reading then
  return {1, tonumber(f[2]), next_token(KEYS[4], ARGV[5])}
end
if ARGV[4] == 'nested' and not reading and not writing then
  if mode == false then return {-1} end
  return {-2}
end
local reentry = reading or writing
if not reentry and redis.call('zcard', KEYS[3]) > 0 then
  if mode == false then return {0, -2} end
  return {0, redis.call('pttl', KEYS[1])}
end

if mode == false then
  local token = next_token(KEYS[4], ARGV[5])
  redis.call('hset', KEYS[1], 'mode', 'read', ARGV[2], 1)
  local err = expire_or_undo(KEYS[1], ARGV[1], KEYS[1])
  if err then
    return err
  end
  redis.call('set', KEYS[2] .. ':1', 1, 'px', ARGV[1])
  return {1, 1, token}
end
if mode == 'read' or (mode == 'write' and writing) then
  if reading and tonumber(f[2]) >= MAX_READ_HOLDS then
    return redis.error_reply('ERR distlock-limit: this owner already holds ' .. f[2] ..
      ' read holds of the lock, the most one owner may have')
  end
  local token = next_token(KEYS[4], ARGV[5])
  -- PEXPIRE before the hold is counted: when the server refuses it, no hold was added.
  local remain = redis.call('pttl', KEYS[1])
  local err = expire_or_undo(KEYS[1], math.max(remain, tonumber(ARGV[1])))
  if err then
    return err
  end
  local ind = redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('set', KEYS[2] .. ':' .. ind, 1, 'px', ARGV[1])
  return {1, ind, token}
end
return {0, redis.call('pttl', KEYS[1])}
