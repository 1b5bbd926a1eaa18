-- semaphore_acquire.lua: take k permits, all or nothing (Redisson's
-- RedissonSemaphore.tryAcquire), recording the grant in a latch so a resend or a cancelled
-- caller can tell whether it happened.
--
-- KEYS[1]  semaphore key (string: available permits)
-- KEYS[2]  grant latch distlock_semaphore_grant:{<name>}:<request-id> (string k, PX)
-- ARGV[1]  permits k
-- ARGV[2]  latch TTL in ms
--
-- Returns  1 taken (or already taken by this request); 0 not enough permits;
--          CANCELLED (-4): this request was cancelled (semaphore_release.lua mode '1') before it ran.
-- Uses     wrong_kind from kinds.lua (joined in front by scripts/mod.rs).
-- Errors   'WRONGTYPE distlock: the key holds a <type> ..., not a semaphore' when KEYS[1] holds
--          another type (a lock's hash, …), before any write.

local prior = redis.call('get', KEYS[2])
if prior then
  if string.sub(prior, 1, 7) == 'undone:' then
    return -4
  end
  return 1
end
local value = redis.pcall('get', KEYS[1])
if type(value) == 'table' then
  -- Not a count: another kind's data (a lock's hash, …), refused before any write.
  return wrong_kind(KEYS[1], 'a semaphore')
end
if value ~= false and value ~= '0' and not string.match(value, '^%-?[1-9]%d*$') then
  -- A string that is no count as INCRBY takes one ('bob', '3.5', '02134'): a user's data, refused before any write.
  return redis.error_reply('WRONGTYPE distlock: the key holds a string that is not a count ' ..
    '(data that is not distlock\'s), not a semaphore')
end
if value ~= false and tonumber(value) >= tonumber(ARGV[1]) then
  redis.call('decrby', KEYS[1], ARGV[1])
  redis.call('set', KEYS[2], ARGV[1], 'px', ARGV[2])
  return 1
end
return 0
