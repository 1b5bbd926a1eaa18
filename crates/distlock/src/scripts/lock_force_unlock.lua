-- lock_force_unlock.lua: delete a lock whoever holds it and wake its waiters.
--
-- Redisson's forceUnlockAsync, refusing keys that are not lock hashes: a typo in a lock name
-- must not delete a user's data. A lock hash (plain, fair, read-write; distlock or Redisson)
-- has only these fields: 'distlock:fencing-token' (digits, or '<generation>:<sequence>'),
-- 'distlock:holder' ('<app>;<host>;<pid>;<since>', plain and fair locks),
-- 'mode' ('read' | 'write', the read-write lock) and owner fields
-- '<client-id>:<owner>[:write]' (they contain ':') whose values are hold counts (digits).
--
-- KEYS[1]  lock key
-- KEYS[2]  wake channel redisson_lock__channel:{name}
-- ARGV[1]  unlock message ('0')
-- ARGV[2]  the kind asked for: 'lock' (a plain or fair lock: a hash without a mode field) or
--          'rw' (a read-write lock: a hash with one)
--
-- Returns  {1, <owner field>...}: the lock existed and was deleted; the owner fields it held
--          (the holders, each '<client-id>:<owner>[:write]'), whose clients the caller then
--          tells (the holder's lost signal: see lock/notice.rs)
--          {0}: it did not exist.
-- Errors   WRONGTYPE when KEYS[1] is not a hash, a hash with a field that no lock has, or a
--          lock of another kind than ARGV[2] (kinds.lua's wrong_kind; nothing deleted, nothing
--          published).
-- Loops    once over the hash's fields (HGETALL): bounded by the key's own size.

local wrongtype = 'WRONGTYPE Operation against a key holding the wrong kind of value'

local kind = redis.call('type', KEYS[1])['ok']
if kind == 'none' then
  return {0}
end
if kind ~= 'hash' then
  return redis.error_reply(wrongtype)
end

local fields = redis.call('hgetall', KEYS[1])
local has_mode = false
local reply = {1}
for i = 1, #fields, 2 do
  local field, value = fields[i], fields[i + 1]
  local ok
  if field == 'distlock:fencing-token' then
    -- '<sequence>', or '<generation>:<sequence>' (Sentinel, Cluster)
    ok = string.match(value, '^%d+$') ~= nil or string.match(value, '^%d+:%d+$') ~= nil
  elseif field == 'distlock:holder' then
    -- not an owner, though its name has a ':'
    ok = string.match(value, '^[^;]*;[^;]*;%d+;%d+') ~= nil
  elseif field == 'mode' then
    ok = value == 'read' or value == 'write'
    has_mode = true
  elseif string.find(field, ':', 1, true) then
    ok = string.match(value, '^%d+$') ~= nil
    reply[#reply + 1] = field
  else
    ok = false
  end
  if not ok then
    return redis.error_reply(wrongtype)
  end
end

if ARGV[2] == 'lock' and has_mode then
  return wrong_kind(KEYS[1], 'a plain or fair lock')
elseif ARGV[2] == 'rw' and not has_mode then
  return wrong_kind(KEYS[1], 'a read-write lock')
end

redis.call('del', KEYS[1])
publish(KEYS[2], ARGV[1])
return reply
