-- semaphore_acquire.lua: take k permits, all or nothing (Redisson's
-- RedissonSemaphore.tryAcquire), recording the grant in a request record so a resend or a
-- cancelled caller can tell whether it happened.
--
-- A request's record is the member <request> (its number within its block plus one: 1 to
-- 64) of a record set: the client's grant records of the epoch in which the request began,
-- and of its block of its client's grant numbers (every send of the request names the same
-- set; see keys::Record). Every write adds the member 0 too, which is there from the set's
-- creation on: SADD answering 2 says this write created the set, and it takes its TTL then
-- (ARGV[3]: the epoch's end plus the records' lifetime). A send made after the epoch ended
-- (an acquire that waited long, ARGV[4]) sets the TTL on every claim, to the lifetime from
-- now (never shorter than what the set's other records need). Every member is an integer, so
-- that Redis 7.0 keeps the set an intset.
--
-- With enough permits, they are taken first (DECRBY refuses a string that is no integer,
-- writing nothing), then the record is claimed (SADD): a resend (its reply was lost, or its
-- first send is still on its way) or a request cancelled before it ran finds the record
-- taken, gives the permits back at once and answers from the record (the member -<request>
-- is the give-back's tombstone). Otherwise nothing is written, and the record answers a
-- resend whose first send took the permits. A claim the server refuses (a user without
-- +sadd or +pexpire, a record key of another type) takes back what this run wrote (the
-- permits, the claim) and answers the refusal: nothing changes, no set is left without TTL.
--
-- KEYS[1]  semaphore key (string: available permits)
-- KEYS[2]  grant records distlock_semaphore_grants:{<name>}:<client-id>:<epoch>:<block> (set:
--          0, the requests granted or given back, -<request> for each given back)
-- ARGV[1]  permits k
-- ARGV[2]  the request's member (its number within the block plus one)
-- ARGV[3]  the TTL in ms KEYS[2] takes when this claim creates it
-- ARGV[4]  '1' when the send was made after KEYS[2]'s epoch ended: every claim sets ARGV[3]
--
-- Returns  1 taken (or already taken by this request); 0 not enough permits;
--          CANCELLED (-4): this request was cancelled (semaphore_give_back.lua) before it ran.
-- Uses     wrong_kind from kinds.lua (joined in front by scripts/mod.rs).
-- Errors   'WRONGTYPE distlock: the key holds a <type> ..., not a semaphore' when KEYS[1] holds
--          another type (a lock's hash, …) or a string that is no count, before any write;
--          DECRBY's own refusal (OOM on a full server, NOPERM) as it is; the record set's
--          refusal (NOPERM, WRONGTYPE) as it is, with nothing changed.

local value = redis.pcall('get', KEYS[1])
-- nil for no key (false) or another type (an error table), as for a string that is no number.
local n = tonumber(value)
local refused
if n and n >= ARGV[1] + 0 then
  local v = redis.pcall('decrby', KEYS[1], ARGV[1])
  if type(v) == 'table' then
    -- Refused, nothing written: a string that Lua reads as a number but INCRBY takes for no
    -- count ('3.5', '0x10'), or a full server (OOM), a user without the right (NOPERM).
    refused = v
  else
    local added = redis.pcall('sadd', KEYS[2], '0', ARGV[2])
    -- (Compared with numbers only: a refusal is a table, equal to none of them.)
    if added == 1 and ARGV[4] ~= '1' then
      return 1
    end
    if added ~= 0 then
      local e = added
      if added == 1 or added == 2 then
        e = redis.pcall('pexpire', KEYS[2], ARGV[3])
        if type(e) ~= 'table' then
          return 1
        end
        -- No TTL allowed: the claim goes (with the set, when the claim made it).
        if added == 2 then
          if type(redis.pcall('srem', KEYS[2], '0', ARGV[2])) == 'table' then
            redis.pcall('del', KEYS[2])
          end
        else
          redis.pcall('srem', KEYS[2], ARGV[2])
        end
      end
      -- The claim was refused (writing nothing), or taken back: the permits go back.
      redis.call('incrby', KEYS[1], ARGV[1])
      return e
    end
    -- The record was taken: a resend, or a cancelled request. These permits go back.
    redis.call('incrby', KEYS[1], ARGV[1])
  end
end
if redis.call('sismember', KEYS[2], ARGV[2]) == 1 then
  if redis.call('sismember', KEYS[2], -ARGV[2]) == 1 then
    return -4
  end
  return 1
end
if type(value) == 'table' then
  -- Not a count: another kind's data (a lock's hash, …), refused before any write.
  return wrong_kind(KEYS[1], 'a semaphore')
end
if refused and not string.find(refused.err, 'not an integer', 1, true) then
  return refused
end
if refused or value ~= false and value ~= '0' and not string.match(value, '^%-?[1-9]%d*$') then
  -- A string that is no count as INCRBY takes one ('bob', '3.5', '02134'): a user's data, refused before any write.
  return redis.error_reply('WRONGTYPE distlock: the key holds a string that is not a count ' ..
    '(data that is not distlock\'s), not a semaphore')
end
return 0
