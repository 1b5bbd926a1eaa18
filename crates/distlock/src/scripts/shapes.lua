-- shapes.lua: what distlock's data looks like, for the scripts that delete or rewrite a key
-- whoever holds it (force-unlocks, a latch's delete, a semaphore's drain and size): each
-- first checks that the key holds its own kind's data, so that a typo in a name never
-- deletes or rewrites a user's data. Not a script of its own: scripts/mod.rs joins it (after
-- prelude.lua and kinds.lua, where those are joined too) in front of each script that uses
-- it, at build time, so it reads no KEYS or ARGV and returns nothing; it only defines local
-- functions. (Not in kinds.lua, which the acquires join: defining a function costs server
-- time on every run.)
--
-- lock_hash(key)
--          Whether key holds a lock hash. A lock hash (plain, fair, read-write; distlock's or
--          Redisson's) has only these fields: 'distlock:fencing-token' (digits, or
--          '<generation>:<sequence>'), 'distlock:holder' ('<app>;<host>;<pid>;<since>', plain
--          and fair locks), 'distlock:queued' ('1', plain locks: see handoff.lua), 'mode'
--          ('read' | 'write', the read-write lock) and owner fields
--          '<client-id>:<owner>[:write]' (they contain ':') whose values are hold counts
--          (digits). Returns a force-unlock's reply and whether the hash has a mode field:
--          {1, <owner field>...} and true or false for a lock hash; {0} when the key does not
--          exist; an error reply (a table with an err field: WRONGTYPE_REPLY) for another
--          type, or a hash with a field or value no lock has. Reads only (TYPE, HGETALL).
--          Loops once over the hash's fields: bounded by the key's own size.
--
-- count_of(key)
--          The count a semaphore, leased semaphore or latch keeps in key, as a number; false
--          when the key does not exist; nil and an error reply for anything else: another
--          type (the server's WRONGTYPE, or its NOPERM), or a string that is not an integer
--          as the server's INCRBY and DECRBY take one (WRONGTYPE_REPLY): '0', or digits
--          without a leading zero, '-' before them, within 64 bits. Not '3.5', '1e3', ' 7',
--          '0x10', 'nan' or '02134', which Lua's tonumber takes. Such an integer is a count in
--          Redisson's layout (a bare integer string), which no script can tell from other data
--          that looks like one. Reads only (GET).
--
-- WRONGTYPE_REPLY
--          The server's own WRONGTYPE message, for a refusal of data that is not distlock's
--          (the client words it as 'the key holds a value of another type').
--
-- Returns  (nothing: helpers only)
-- Errors   none raised: the refusals are returned, for the caller to return before it writes
--          anything.

local WRONGTYPE_REPLY = 'WRONGTYPE Operation against a key holding the wrong kind of value'

local function lock_hash(key)
  local t = redis.call('type', key)['ok']
  if t == 'none' then
    return {0}, false
  end
  if t ~= 'hash' then
    return redis.error_reply(WRONGTYPE_REPLY), false
  end
  local fields = redis.call('hgetall', key)
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
    elseif field == 'distlock:queued' then
      -- the hand-off queue's mark (handoff.lua), not an owner
      ok = value == '1'
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
      return redis.error_reply(WRONGTYPE_REPLY), false
    end
  end
  return reply, has_mode
end

local function count_of(key)
  local value = redis.pcall('get', key)
  if value == false then
    return false
  end
  if type(value) == 'table' then
    -- Another type (WRONGTYPE), or an ACL refusal (NOPERM): the server's own error.
    return nil, value
  end
  local digits = string.match(value, '^%-?([1-9]%d*)$')
  local integer = value == '0' or (digits ~= nil and #digits <= 19)
  if integer and digits and #digits == 19 then
    -- Equal lengths: the strings compare as the numbers do.
    integer = digits <= (string.sub(value, 1, 1) == '-' and '9223372036854775808'
      or '9223372036854775807')
  end
  if not integer then
    return nil, redis.error_reply(WRONGTYPE_REPLY)
  end
  return tonumber(value)
end
