-- leased_acquire.lua: take one permit with a lease, in Redisson's RPermitExpirableSemaphore
-- layout, reclaiming ended leases first. Expiry is server time (TIME, ms since the epoch) —
-- the same unit and epoch as Redisson's client-clock scores, so both sides read the zset
-- alike (hosts are expected to keep their clocks in sync, as Redisson itself assumes).
--
-- KEYS[1]  semaphore key <name> (string: available permits)
-- KEYS[2]  leases {<name>}:timeout (zset: 16-byte permit id -> expiry, ms)
-- KEYS[3]  channel redisson_sc:{<name>}
-- KEYS[4]  the leases key of older distlock versions, redisson__timeout__set:{<name>}
--          (migrated into KEYS[2] when present)
-- KEYS[5]  direct hand-off queue distlock_permit_queue:{<name>} (zset; see permit_queue.lua)
-- KEYS[6]  its waiter entries distlock_permit_waiters:{<name>} (hash)
-- ARGV[1]  permit id: 16 raw bytes (chosen by the caller, so a resend or a cancel finds it)
-- ARGV[2]  lease in ms
-- ARGV[3]  hand-off: the caller's queue entry '<liveness_ms>;<lease_ms>;<client-id>;<hex id>'
--          when it waits for a hand-off (a refused attempt queues it, or renews its place);
--          '0' when it makes one attempt (it lets queued waiters go first, but does not
--          queue); '' without hand-off (Redisson's behaviour: it takes any available permit)
--
-- Returns  {1, expiry_ms, left_ms}
--                           taken (or already taken under this id: a resend, or a hand-off
--                           whose message the caller has not read yet, whose lease may have
--                           been cut short); left_ms: its lease's time left
--          {0, wait_ms}     none available (or only for live waiters queued before the
--                           caller); wait_ms until the earliest lease ends (-1: none that
--                           ends on its own)
-- Errors   WRONGTYPE when a key holds another type; KEYS[1] a hash (a lock's) or other non-count:
--          'WRONGTYPE distlock: the key holds a <type> ..., not a leased semaphore'.
--
-- Uses now_ms from prelude.lua, migrate_leases, reclaim_leases, lease_permit and
-- earliest_lease_end from leases.lua, and permit_queue from permit_queue.lua (joined in front
-- by scripts/mod.rs). With a queue, the available permits go to its live waiters in arrival
-- order first (each is announced its grant), then to the caller.

local now = now_ms()
migrate_leases(KEYS[4], KEYS[2])
reclaim_leases(KEYS[1], KEYS[2], KEYS[3], now)
local mine = redis.call('zscore', KEYS[2], ARGV[1])
if mine ~= false then
  return {1, tonumber(mine), tonumber(mine) - now}
end
local count = redis.pcall('get', KEYS[1])
if type(count) == 'table' then
  -- Not a count: another kind's data (a lock's hash, …), refused before any write.
  return wrong_kind(KEYS[1], 'a leased semaphore')
end
if count ~= false and count ~= '0' and not string.match(count, '^%-?[1-9]%d*$') then
  -- A string that is no count as INCRBY takes one ('bob', '3.5', '02134'): a user's data, refused before any write.
  return redis.error_reply('WRONGTYPE distlock: the key holds a string that is not a count ' ..
    '(data that is not distlock\'s), not a leased semaphore')
end
local available = tonumber(count or '0')
local q
if available >= 1 and ARGV[3] ~= '' and redis.call('exists', KEYS[5]) == 1 then
  q = permit_queue()
  available = q.serve(KEYS[1], KEYS[2], KEYS[5], KEYS[6], available, now, ARGV[1])
end
if available >= 1 then
  redis.call('decrby', KEYS[1], 1)
  local expiry = now + tonumber(ARGV[2])
  lease_permit(KEYS[1], KEYS[2], ARGV[1], expiry)
  if q then
    q.dequeue(KEYS[5], KEYS[6], ARGV[1])
  end
  return {1, expiry, tonumber(ARGV[2])}
end
if #ARGV[3] > 1 then
  (q or permit_queue()).enqueue(KEYS[5], KEYS[6], ARGV[1], ARGV[3], now)
end
local ends = earliest_lease_end(KEYS[2])
if ends ~= nil then
  return {0, math.max(ends - now, 0)}
end
return {0, -1}
