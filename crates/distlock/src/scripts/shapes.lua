-- shapes.lua: what distlock's data looks like, for the scripts that delete a key whoever
-- holds it (force-unlocks): each first checks that the key holds its own kind's data, so that
-- a typo in a name never deletes a user's data. Not a script of its own: scripts/mod.rs joins
-- it (after prelude.lua and kinds.lua, where those are joined too) in front of each script
-- that uses it, at build time, so it reads no KEYS or ARGV and returns nothing; it only
-- defines local functions. (Not in kinds.lua, which the acquires join: defining a function
-- costs server time on every run.)
--
-- lock_hash(key)
--          Whether key holds a lock hash. A lock hash (plain, fair, read-write; distlock's or
--          Redisson's) has only these fields: 'distlock:fencing-token' (digits, or
--          '<generation>:<sequence>'), 'distlock:holder' ('<app>;<host>;<pid>;<since>', plain
--          and fair locks), 'mode' ('read' | 'write', the read-write lock) and owner fields
--          '<client-id>:<owner>[:write]' (they contain ':') whose values are hold counts
--          (digits). Returns a force-unlock's reply and whether the hash has a mode field:
--          {1, <owner field>...} and true or false for a lock hash; {0} when the key does not
--          exist; an error reply (a table with an err field: WRONGTYPE_REPLY) for another
--          type, or a hash with a field or value no lock has. Reads only (TYPE, HGETALL).
--          Loops once over the hash's fields: bounded by the key's own size.
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

