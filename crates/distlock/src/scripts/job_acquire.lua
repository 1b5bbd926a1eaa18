-- job_acquire.lua: take a job lock if free (ShedLock's SET NX PX), and tell a key of another
-- type apart from a held lock.
--
-- KEYS[1]  job lock key job-lock:<env>:<name> (string)
-- ARGV[1]  value ADDED:<iso-8601>@<host>:<uuid>
-- ARGV[2]  at_most_for in ms
--
-- Returns  1 taken (or, on a resend, already taken by this very request: the value holds a
--          uuid minted per request); 0 held by another instance.
-- Errors   WRONGTYPE when KEYS[1] holds another type (nothing written).

if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 1
end
if redis.call('type', KEYS[1])['ok'] ~= 'string' then
  return redis.error_reply('WRONGTYPE the job lock key holds a value of another type')
end
if redis.call('get', KEYS[1]) == ARGV[1] then
  return 1
end
return 0
