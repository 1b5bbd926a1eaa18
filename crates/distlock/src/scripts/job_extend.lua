-- job_extend.lua: move a job lock's expiry, only if it is ours (ShedLock's
-- KeepAliveLockProvider / extend, ownership-checked).
--
-- KEYS[1]  job lock key job-lock:<env>:<name> (string)
-- ARGV[1]  our value
-- ARGV[2]  new TTL in ms from now
--
-- Returns  1 extended; GONE (-1) not held: gone;
--          HELD_BY_OTHER (-2) not held: another holder's value.
-- Errors   WRONGTYPE when KEYS[1] holds another type.

local current = redis.call('get', KEYS[1])
if current == false then
  return -1
end
if current ~= ARGV[1] then
  return -2
end
redis.call('pexpire', KEYS[1], ARGV[2])
return 1
