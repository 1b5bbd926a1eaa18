-- semaphore_drain.lua: take every available permit (Redisson's drainPermits).
--
-- KEYS[1]  semaphore key (string: available permits)
--
-- Returns  the number of permits taken.
-- Errors   WRONGTYPE when KEYS[1] holds another type.

local value = redis.call('get', KEYS[1])
if value == false or tonumber(value) <= 0 then
  return 0
end
redis.call('set', KEYS[1], 0)
return tonumber(value)
