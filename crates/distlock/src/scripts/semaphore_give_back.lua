-- semaphore_give_back.lua: give back the permits of a semaphore acquire whose outcome its
-- caller does not know (it gave up waiting for the answer, or the grant was not confirmed by
-- the replicas), at most once, through the acquire's grant record.
--
-- One SADD adds the acquire's member, the tombstone -<member> and the set's member 0 (see
-- semaphore_acquire.lua; the three are always added together but for the member alone, by
-- the acquire): it answers 0 when the tombstone was there (a resend: nothing again), 1 when
-- only the tombstone is new (the acquire ran: its permits are given back), 2 or 3 when the
-- acquire's member is new too (it has not run: the member and its tombstone make an acquire
-- still on its way, or queued on a stalled server, do nothing when it runs:
-- semaphore_acquire.lua answers CANCELLED). The set keeps at least ARGV[3] ms of TTL (raised
-- when it has less, or was created here); a refused PEXPIRE takes back what the SADD added.
--
-- KEYS[1]  semaphore key (string: available permits)
-- KEYS[2]  channel redisson_sc:{<name>}
-- KEYS[3]  the acquire's grant records
--          distlock_semaphore_grants:{<name>}:<client-id>:<epoch>:<block> (set)
-- ARGV[1]  permits k
-- ARGV[2]  the acquire's member (its number within the block plus one)
-- ARGV[3]  the TTL in ms KEYS[3] keeps at least (as long as the grant records live)
--
-- Returns  the permits available afterwards, or GONE (-1) when nothing was given back (the
--          acquire never ran, or was given back already).
-- Errors   WRONGTYPE when KEYS[1] or KEYS[3] holds another type; the record set's refusal
--          (NOPERM) as it is, with nothing changed.

local added = redis.call('sadd', KEYS[3], '0', ARGV[2], -ARGV[2])
if added == 0 then
  return -1
end
if redis.call('pttl', KEYS[3]) < tonumber(ARGV[3]) then
  local e = redis.pcall('pexpire', KEYS[3], ARGV[3])
  if type(e) == 'table' then
    if added == 3 then
      if type(redis.pcall('srem', KEYS[3], '0', ARGV[2], -ARGV[2])) == 'table' then
        redis.pcall('del', KEYS[3])
      end
    elseif added == 2 then
      redis.pcall('srem', KEYS[3], ARGV[2], -ARGV[2])
    else
      redis.pcall('srem', KEYS[3], -ARGV[2])
    end
    return e
  end
end
if added ~= 1 then
  return -1
end
local v = redis.call('incrby', KEYS[1], ARGV[1])
-- A user without channel rights still gives back (waiters fall back to polling).
publish(KEYS[2], v)
return v
