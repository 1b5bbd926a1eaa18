-- leases.lua: helpers shared by the leased-semaphore scripts (Redisson's
-- RPermitExpirableSemaphore layout). Not a script of its own: scripts/mod.rs joins it (after
-- prelude.lua) in front of each leased_*.lua script at build time; it reads no KEYS or ARGV
-- and returns nothing, it only defines local functions.
--
-- The layout: the available permits in the string <name>; the leases in the zset
-- {<name>}:timeout, member = the permit id's 16 raw bytes, score = expiry in ms since the
-- epoch (Redisson: NO_LEASE for a permit without a lease).
--
-- migrate_leases(old_key, leases_key)
--          Move the leases an older distlock recorded under redisson__timeout__set:{<name>}
--          (members: the id as 32 hex characters) into leases_key (members: the 16 raw bytes),
--          keeping their expiry, and delete old_key. One EXISTS when there is nothing to move.
--
-- reclaim_leases(counter_key, leases_key, channel, now)
--          Redisson's reclaim: remove the leases that ended at or before now (ms), add their
--          permits to counter_key, and when the count is then positive publish it on channel
--          (pcall: a user without rights on the channel still gets the script's result).
--          Returns how many were reclaimed.
--
-- lease_permit(counter_key, leases_key, id, expiry)
--          Record permit id (16 raw bytes) in leases_key with expiry (ms since the epoch);
--          as Redisson, the leases live as long as counter_key when it has a TTL.
--
-- earliest_lease_end(leases_key)
--          The lowest expiry in leases_key as a number, or nil when there is none or it is
--          Redisson's NO_LEASE (that permit never returns on its own).
--
-- Returns  (nothing: helpers only)
-- Errors   WRONGTYPE from the commands when a key holds another type.

-- Redisson's score of a permit taken without a lease (nonExpirableTimeout).
local NO_LEASE = '922337203685477'

local function migrate_leases(old_key, leases_key)
  if redis.call('exists', old_key) == 0 then
    return
  end
  local entries = redis.call('zrange', old_key, 0, -1, 'WITHSCORES')
  for i = 1, #entries, 2 do
    local id = entries[i]
    if #id == 32 and not string.find(id, '[^0-9a-f]') then
      id = string.gsub(id, '..', function(h) return string.char(tonumber(h, 16)) end)
    end
    redis.call('zadd', leases_key, entries[i + 1], id)
  end
  redis.call('del', old_key)
end

local function reclaim_leases(counter_key, leases_key, channel, now)
  local expired = redis.call('zremrangebyscore', leases_key, '-inf', now)
  if expired == 0 then
    return 0
  end
  local v = redis.call('incrby', counter_key, expired)
  if v > 0 then
    publish(channel, v)
  end
  return expired
end

local function lease_permit(counter_key, leases_key, id, expiry)
  redis.call('zadd', leases_key, expiry, id)
  local ttl = redis.call('pttl', counter_key)
  if ttl > 0 then
    redis.call('pexpire', leases_key, ttl)
  end
end

local function earliest_lease_end(leases_key)
  local first = redis.call('zrange', leases_key, 0, 0, 'WITHSCORES')
  if first[2] == nil or first[2] == NO_LEASE then
    return nil
  end
  return tonumber(first[2])
end
