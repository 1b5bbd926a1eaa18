-- job_force_unlock.lua: delete a job lock whoever holds it (an operator clearing a stuck
-- job lock, as deleting ShedLock's key by hand), refusing keys that are not job locks.
--
-- KEYS[1]  job lock key job-lock:<env>:<name> (string)
--
-- Returns  the value deleted ('ADDED:<iso-8601>@<host>[:<uuid>]', ShedLock's format): the
--          caller publishes it on the job's notice channel, where the holder's guard hears
--          that its lock is gone; nil when there was no key.
-- Errors   WRONGTYPE when KEYS[1] holds another type, or a string that is not a ShedLock
--          value (nothing deleted).

local value = redis.call('get', KEYS[1])
if value == false then
  return nil
end
if string.sub(value, 1, 6) ~= 'ADDED:' or not string.find(value, '@', 7, true) then
  return redis.error_reply('WRONGTYPE the job lock key holds a string that is not a job lock')
end
redis.call('del', KEYS[1])
return value
