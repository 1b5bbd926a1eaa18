-- semaphore_drain.lua: take every available permit (Redisson's drainPermits).
--
-- KEYS[1]  semaphore key (string: available permits)
--
-- Returns  the number of permits taken.
-- Errors   WRONGTYPE when KEYS[1] holds another type, or a string that is not an integer
--          (shapes.lua's count_of); nothing written. An integer is a semaphore's permits in
--          Redisson's layout, which no script can tell from other data that looks like one:
--          it is drained.
--
-- Uses count_of from shapes.lua (joined in front by scripts/mod.rs).

local value, refused = count_of(KEYS[1])
if refused then
  return refused
end
if value == false or value <= 0 then
  return 0
end
redis.call('set', KEYS[1], 0)
return value
