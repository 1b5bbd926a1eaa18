-- rw_write_acquire.lua: take a write hold of a read-write lock (Redisson RedissonWriteLock
-- layout); a refused writer registers as waiting so new readers hold back.
--
-- KEYS[1]  lock key (hash; see rw_read_acquire.lua)
-- KEYS[2]  waiting writers distlock_rwlock_writers:{<name>} (zset owner -> deadline ms)
-- KEYS[3]  fencing counter of the lock's slot (string): <prefix>distlock:fencing-counter:{<tag>}
-- KEYS[4]  the direct hand-off queue distlock_rwlock_queue:{<name>} (zset, same slot; see
--          rw_handoff.lua)
-- KEYS[5]  its writer entries distlock_rwlock_waiters:{<name>} (hash, same slot)
-- ARGV[1]  lease in ms
-- ARGV[2]  owner's write field <owner>:write
-- ARGV[3]  owner field (its read holds)
-- ARGV[4]  mode: 'new' | 'nested'
-- ARGV[5]  liveness timeout of a waiting writer, ms
-- ARGV[6]  '1' to register as a waiting writer when refused, '0' for a single attempt
-- ARGV[7]  token floor of a new counter (decimal; see prelude.lua's next_token)
-- ARGV[8]  '<initial_ms>;<client-id>' when a refused fresh owner queues for direct hand-off
--          (initial_ms: the lease a hand-off grants it), '' when it does not. Either way a
--          free lock whose queue has a live writer goes to that writer: the caller gets it
--          when it is that writer, else it is handed to the writer now and the caller is
--          refused.
--
-- Returns  {1, write_holds, fencing_token}  granted (every grant draws a fresh token); the
--                                            token as a decimal string (exact up to 2^63 - 1)
--          {0, wait_ms, issued}              refused (lock PTTL: the holder's, or the lease
--                                            handed to an earlier writer); issued: the last
--                                            token issued in the lock's slot (the counter's
--                                            value, '' when none): a hand-off message to the
--                                            caller with a token at or below it was sent
--                                            before this attempt
--          {GONE} / {HELD_BY_OTHER}          'nested': gone / not held by this owner
--          {READ_HELD}                       refused: this owner holds only a read lock
--                                            (read -> write upgrade would deadlock)
-- Errors   WRONGTYPE when KEYS[1] holds another type, or a hash without a mode field (a plain
--          or fair lock's): 'WRONGTYPE distlock: the key holds …' (kinds.lua's wrong_kind),
--          before any write.
--          'ERR distlock: fencing counter ...' when the counter cannot issue a token, and a
--          refused PEXPIRE (e.g. NOPERM): nothing granted or registered (expired waiting
--          writers may have been dropped).
--
-- Uses now_ms, next_token, expire_or_undo and error_reply from prelude.lua, and rw_handoff.lua
-- (joined in front by scripts/mod.rs, with handoff.lua).

local now = now_ms()
-- A hash without a mode field is a plain or fair lock (Redisson RLock layout): refused before
-- anything is written.
local f = redis.pcall('hmget', KEYS[1], 'mode', ARGV[2], ARGV[3])
if f.err or (f[1] == false and redis.call('exists', KEYS[1]) == 1) then
  return wrong_kind(KEYS[1], 'a read-write lock')
end
local mode, writing, reading = f[1], f[2] ~= false, f[3] ~= false
redis.call('zremrangebyscore', KEYS[2], '-inf', now)

if writing then
  if ARGV[4] == 'new' then
    -- A resend of a granted request, or a writer the lock was handed to (its grant message
    -- lost, or not read yet): the same hold, the full lease, a fresh token.
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1, tonumber(f[2]), next_token(KEYS[3], ARGV[7])}
  end
  local token = next_token(KEYS[3], ARGV[7])
  -- PEXPIRE first: when the server refuses it, no hold was added.
  local err = expire_or_undo(KEYS[1], ARGV[1])
  if err then
    return err
  end
  local count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
  return {1, count, token}
end
if reading then
  return {-3}
end
if ARGV[4] == 'nested' then
  if mode == false then return {-1} end
  return {-2}
end
local head, entry, q
if mode == false then
  -- First in line: a live queued writer other than the caller gets the free lock now (if
  -- the server refuses the hand-off's PEXPIRE, the caller's own grant below meets the same).
  head, entry, q = rw_queue_head(KEYS[4], KEYS[5])
  if head and head ~= ARGV[3] and
      rw_grant(q, KEYS[1], KEYS[3], ARGV[7], KEYS[4], KEYS[5], KEYS[2], head, entry) then
    mode = 'write'
  end
end
if mode == false then
  if head then
    q.dequeue(KEYS[4], KEYS[5], ARGV[3])
  end
  local token = next_token(KEYS[3], ARGV[7])
  redis.call('hset', KEYS[1], 'mode', 'write', ARGV[2], 1)
  local err = expire_or_undo(KEYS[1], ARGV[1], KEYS[1])
  if err then
    return err
  end
  redis.call('zrem', KEYS[2], ARGV[3])
  return {1, 1, token}
end
if ARGV[6] == '1' then
  redis.call('zadd', KEYS[2], now + tonumber(ARGV[5]), ARGV[3])
  local r = redis.pcall('pexpire', KEYS[2], ARGV[5])
  if type(r) == 'table' and r.err then
    -- Not registered after all: a set of waiting writers without a TTL would hold readers
    -- back after its last writer is gone.
    redis.call('zrem', KEYS[2], ARGV[3])
    return error_reply(r.err)
  end
end
if ARGV[8] ~= '' then
  -- The helpers made above when the free lock was handed to an earlier writer, else now.
  q = q or queue_helpers()
  q.enqueue(KEYS[4], KEYS[5], ARGV[3], ARGV[5] .. ';' .. ARGV[8], '', now)
end
-- The last token issued in the lock's slot: a hand-off message to this caller with a token at
-- or below it was sent before this attempt, so it is no grant if it arrives after the reply.
return {0, redis.call('pttl', KEYS[1]), redis.call('get', KEYS[3]) or ''}
