-- job_release.lua: end a job lock, only if it is ours (ShedLock's unlock without its flaw).
--
-- ShedLock's Redis provider unlocks with a plain DEL, or SET XX PX for lockAtLeastFor,
-- whoever holds the key (ShedLock's Redis provider): a job that outlived lockAtMostFor deletes the next
-- holder's lock. Here both branches first compare the value.
--
-- KEYS[1]  job lock key job-lock:<env>:<name> (string)
-- ARGV[1]  our value ADDED:<iso-8601>@<host>:<uuid>
-- ARGV[2]  remaining at-least-for time in ms; absent or 0: delete now (the common case,
--          sent without it: one argument less)
--
-- Returns  1   deleted
--          0   kept until the at-least-for time (TTL shortened to ARGV[2], never lengthened)
--          -1  GONE: not held, the key is gone (at-most-for passed)
--          -2  HELD_BY_OTHER: not held, another holder's value is there
-- Errors   WRONGTYPE when KEYS[1] holds another type (before any write).

local current = redis.call('get', KEYS[1])
if current ~= ARGV[1] then
  if current == false then
    return -1
  end
  return -2
end
if ARGV[2] ~= nil then
  local keep = tonumber(ARGV[2])
  if keep > 0 then
    local pttl = redis.call('pttl', KEYS[1])
    if pttl < 0 or pttl > keep then
      redis.call('pexpire', KEYS[1], keep)
    end
    return 0
  end
end
redis.call('del', KEYS[1])
return 1
