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
-- Cost: EXISTS, TIME, SET..GET, HSET, PEXPIRE; builds two key names and two strings.

local key = KEYS[1]
local tag = key
if not string.find(key, '{', 1, true) then
  tag = '{' .. key .. '}'
end
if redis.call('exists', key, 'distlock_lock_queue:' .. tag, 'redisson_lock_token:' .. tag) > 0 then
  return nil
end
local t = redis.call('time')
local us = t[2]
if #us < 6 then
  us = string.rep('0', 6 - #us) .. us
end
local now = t[1] .. us
local last = redis.call('set', KEYS[2], now, 'GET')
-- Doubles round monotonically, so tonumber(a) < tonumber(b) implies a < b for decimals.
if (last and (not string.find(last, '^%d+$') or tonumber(last) >= tonumber(now))) or
    (not last and ARGV[4]) then
  if last then
    redis.call('set', KEYS[2], last)
  else
    redis.call('del', KEYS[2])
  end
  return nil
end
redis.call('hset', key, ARGV[2], 1, 'distlock:fencing-token', now, 'distlock:holder',
  ARGV[3] .. ';' .. t[1])
local r = redis.pcall('pexpire', key, ARGV[1])
if type(r) == 'table' then
  redis.call('del', key)
  return r
end
return now
