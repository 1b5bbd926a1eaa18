-- semaphore_acquire.lua: take k permits, all or nothing (Redisson's
-- RedissonSemaphore.tryAcquire), recording the grant in a latch so a resend or a cancelled
-- caller can tell whether it happened.
--
-- With enough permits, they are taken first (DECRBY refuses a string that is no integer,
-- writing nothing), then the grant latch is claimed with SET NX: a resend (its reply was lost,
-- or its first send is still on its way) or a request cancelled before it ran finds the latch
-- taken, gives the permits back at once and answers from the latch. Otherwise nothing is
-- written, and the latch answers a resend whose first send took the permits.
--
-- KEYS[1]  semaphore key (string: available permits)
-- KEYS[2]  grant latch distlock_semaphore_grant:{<name>}:<request-id> (string k, PX)
-- ARGV[1]  permits k
-- ARGV[2]  latch TTL in ms
--
-- Returns  1 taken (or already taken by this request); 0 not enough permits;
--          CANCELLED (-4): this request was cancelled (semaphore_give_back.lua) before it ran.
-- Uses     wrong_kind from kinds.lua (joined in front by scripts/mod.rs).
-- Errors   'WRONGTYPE distlock: the key holds a <type> ..., not a semaphore' when KEYS[1] holds
--          another type (a lock's hash, …) or a string that is no count, before any write;
--          DECRBY's own refusal (OOM on a full server, NOPERM) as it is.

local value = redis.pcall('get', KEYS[1])
local n = type(value) == 'string' and tonumber(value)
local refused
if n and n >= tonumber(ARGV[1]) then
  local v = redis.pcall('decrby', KEYS[1], ARGV[1])
  if type(v) == 'table' then
    -- Refused, nothing written: a string that Lua reads as a number but INCRBY takes for no
    -- count ('3.5', '0x10'), or a full server (OOM), a user without the right (NOPERM).
    refused = v
  elseif redis.call('set', KEYS[2], ARGV[1], 'nx', 'px', ARGV[2]) then
    return 1
  else
    -- The latch was taken: a resend, or a cancelled request. These permits go back.
    redis.call('incrby', KEYS[1], ARGV[1])
  end
end
local prior = redis.call('get', KEYS[2])
if prior then
  if string.sub(prior, 1, 7) == 'undone:' then
    return -4
  end
  return 1
end
if type(value) == 'table' then
  -- Not a count: another kind's data (a lock's hash, …), refused before any write.
  return wrong_kind(KEYS[1], 'a semaphore')
end
if refused and not string.find(refused.err, 'not an integer', 1, true) then
  return refused
end
if refused or value ~= false and value ~= '0' and not string.match(value, '^%-?[1-9]%d*$') then
  -- A string that is no count as INCRBY takes one ('bob', '3.5', '02134'): a user's data, refused before any write.
  return redis.error_reply('WRONGTYPE distlock: the key holds a string that is not a count ' ..
    '(data that is not distlock\'s), not a semaphore')
end
return 0
