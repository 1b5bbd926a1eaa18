-- kinds.lua: how a script refuses a key that holds another kind of primitive's data. Not a
-- script of its own: scripts/mod.rs joins it (after prelude.lua, where that is joined too) in
-- front of each script that uses it, at build time, so it reads no KEYS or ARGV and returns
-- nothing; it only defines a local function.
--
-- wrong_kind(key, wanted)
--          The error reply for a key that holds another kind's data (a read-write lock's hash
--          where a plain or fair lock was asked for, a lock hash where a semaphore count was,
--          …): 'WRONGTYPE distlock: the key holds <what TYPE and the mode field say it is>, not
--          <wanted>'. Called only on a refusal, before the script writes anything, so a name
--          used by two kinds of primitive is refused and changes nothing.
--          Cost: TYPE, and HEXISTS for a hash.
--
-- Returns  (nothing: helpers only)

local function wrong_kind(key, wanted)
  -- pcall: a user whose ACL lacks TYPE or HEXISTS still gets the refusal, worded loosely.
  local t = redis.pcall('type', key)['ok'] or 'value of another type'
  local found
  if t == 'hash' then
    if redis.pcall('hexists', key, 'mode') == 1 then
      found = 'a read-write lock (a hash with a mode field, as Redisson RReadWriteLock)'
    else
      found = 'a plain or fair lock (a hash without a mode field, as Redisson RLock)'
    end
  elseif t == 'string' then
    found = 'a string (a semaphore, leased semaphore or latch count, or other data)'
  else
    found = 'a ' .. t
  end
  return redis.error_reply('WRONGTYPE distlock: the key holds ' .. found .. ', not ' .. wanted)
end
