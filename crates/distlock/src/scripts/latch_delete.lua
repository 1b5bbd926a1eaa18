-- latch_delete.lua: delete a count-down latch (open it without waking anyone; Redisson's
-- RCountDownLatch.delete), refusing a key that does not hold a latch's count: a typo in a
-- latch name must not delete a user's data.
--
-- KEYS[1]  latch key (string count)
--
-- Returns  1 deleted; 0 there was no latch.
-- Errors   WRONGTYPE when KEYS[1] holds another type, or a string that is not an integer
--          (shapes.lua's count_of); nothing deleted. An integer is a latch's count in
--          Redisson's layout, which no script can tell from other data that looks like one (or
--          from a semaphore's permits): it is deleted.
--
-- Uses count_of from shapes.lua (joined in front by scripts/mod.rs).

local count, refused = count_of(KEYS[1])
if refused then
  return refused
end
if count == false then
  return 0
end
return redis.call('del', KEYS[1])
