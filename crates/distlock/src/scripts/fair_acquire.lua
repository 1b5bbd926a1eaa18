-- fair_acquire.lua: grant a fair (FIFO) reentrant lock, or queue the caller.
--
-- Redisson's RedissonFairLock (hash + queue list + score zset, with Redisson's score
-- arithmetic: see fair.lua), so Java and Rust waiters share one FIFO queue. distlock waiters
-- also keep a liveness deadline in server time (distlock_fair_liveness:{name}), renewed by
-- every attempt: a distlock waiter that crashed is passed over once it ends (seconds, not
-- Redisson's minutes: Redisson issues #2883, #3004, #6150).
--
-- KEYS[1]  lock key (hash, field <owner> -> hold count, the token field distlock:fencing-token,
--          the holder field distlock:holder)
-- KEYS[2]  queue redisson_lock_queue:{name} (list of owners, head first)
-- KEYS[3]  scores redisson_lock_timeout:{name} (zset owner -> Redisson's score, ms)
-- KEYS[4]  fencing counter of the lock's slot (string): <prefix>distlock:fencing-counter:{<tag>}
-- KEYS[5]  liveness distlock_fair_liveness:{name} (zset owner -> liveness deadline, ms)
-- KEYS[6]  hand-off entries distlock_fair_waiters:{name} (hash; see fair.lua)
-- ARGV[1]  lease in ms
-- ARGV[2]  owner field
-- ARGV[3]  liveness timeout in ms
-- ARGV[4]  mode: 'new' (fresh owner; a resend of a granted request answers the same grant)
--                'nested' (re-entry: only if this owner holds the lock)
-- ARGV[5]  '1' to join (or stay in) the queue when not granted; '0' for a single attempt
-- ARGV[6]  wake channel prefix redisson_lock__channel:{name} (a waiter's channel is
--          <prefix>:<owner>)
-- ARGV[7]  token floor of a new counter (decimal), or '<generation>:<floor>' (see prelude.lua's
--          next_token)
-- ARGV[8]  the caller's whole wait in ms (Redisson's score arithmetic); 0 for no wait
-- ARGV[9]  the client's holder metadata '<app>;<host>;<pid>': the holder field, written on a
--          grant to a new holder (never on a re-entry or a resend; it goes with the key on the
--          last release), is '<ARGV[9]>;<server time in s>' (prelude.lua's holder_value)
-- ARGV[10] direct hand-off: '<initial_ms>;<client-id>' for a queued waiter that takes a
--          hand-off (a release then grants it the lock with a lease of initial_ms and tells its
--          client), '' for none. A free lock whose live head waiter takes hand-offs is handed
--          to it by this script too.
--
-- Returns  {1, hold_count, fencing_token}  granted (or re-entered); the token as a string:
--                                           '<sequence>' (decimal, at most 2^63 - 1) or
--                                           '<generation>:<sequence>'
--          {0, wait_ms, issued}             not granted (wait_ms: lock PTTL, -2 when free but
--                                            an earlier waiter is first, -1 no TTL); issued:
--                                            the slot counter's value as stored ('' when it
--                                            has none; the client reads the last token issued
--                                            in it): a hand-off message to the caller with a
--                                            token at or below it is stale
--          {GONE} / {HELD_BY_OTHER}         mode 'nested': gone / another owner holds it
-- Errors   WRONGTYPE when KEYS[1] holds another type (raised before any write).
--          'ERR distlock: fencing counter ...' when the counter cannot issue a token, and a
--          refused PEXPIRE (e.g. NOPERM): nothing granted, the lock key and the queue as they
--          were (stale heads may have been dropped).
--
-- Uses now_ms, next_token, held_token, holder_value and expire_or_undo from prelude.lua,
-- TOKEN_FIELD and HOLDER_FIELD from handoff.lua, and drop_stale_heads, queue_score,
-- shift_scores and serve_head from fair.lua (joined in front by scripts/mod.rs).

local now = now_ms()
local exists = redis.call('exists', KEYS[1])
local mine = false
if exists == 1 then
  -- Held: by this owner, by another, or the key holds another kind's data (a read-write
  -- lock's hash, a semaphore's count), which is refused before anything is written.
  local held = redis.pcall('hmget', KEYS[1], ARGV[2], 'mode')
  if held.err or held[2] then
    return wrong_kind(KEYS[1], 'a fair lock')
  end
  mine = held[1] ~= false
end

-- Drop dead waiters at the head; the new head is woken below if the lock is free.
local dropped = drop_stale_heads(KEYS[2], KEYS[3], KEYS[5], KEYS[6], now)

if mine then
  if ARGV[4] == 'new' then
    -- A resend of a granted request: same hold, same token. The PEXPIRE is also the write a
    -- replica-confirmation (WAIT) on this connection then covers.
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1, tonumber(redis.call('hget', KEYS[1], ARGV[2])),
            held_token(KEYS[1], TOKEN_FIELD, KEYS[4], ARGV[7])}
  end
  -- PEXPIRE first: when the server refuses it, nothing has been written.
  local err = expire_or_undo(KEYS[1], ARGV[1])
  if err then
    return err
  end
  local count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
  return {1, count, held_token(KEYS[1], TOKEN_FIELD, KEYS[4], ARGV[7])}
end
if ARGV[4] == 'nested' then
  if exists == 1 then return {-2} end
  return {-1}
end

local head = redis.call('lindex', KEYS[2], 0)
if exists == 0 and (head == false or head == ARGV[2]) then
  local token = next_token(KEYS[4], ARGV[7])
  redis.call('hset', KEYS[1], ARGV[2], 1, TOKEN_FIELD, token, HOLDER_FIELD,
    holder_value(ARGV[9]))
  local err = expire_or_undo(KEYS[1], ARGV[1], KEYS[1])
  if err then
    return err
  end
  if head == ARGV[2] then
    redis.call('lpop', KEYS[2])
  end
  redis.call('zrem', KEYS[3], ARGV[2])
  redis.call('zrem', KEYS[5], ARGV[2])
  redis.call('hdel', KEYS[6], ARGV[2])
  shift_scores(KEYS[3], tonumber(ARGV[8]))
  return {1, 1, token}
end

-- Free, and another waiter is first: hand it the lock when it takes hand-offs; else wake it
-- when dead heads were just dropped (it may not know it is first). pcall'd publish: a user
-- without rights on the channel still gets its answer (the head re-checks within its
-- liveness period anyway).
if exists == 0 and head ~= false and
    serve_head(KEYS[1], KEYS[2], KEYS[3], KEYS[5], KEYS[6], KEYS[4], ARGV[7], ARGV[6], dropped) then
  exists = 1
end
if ARGV[5] == '1' then
  -- Queued already: keep the place and its Redisson score; else join the tail.
  if redis.call('zscore', KEYS[3], ARGV[2]) == false then
    local score = queue_score(KEYS[2], KEYS[3], KEYS[1], ARGV[2], tonumber(ARGV[8]), now)
    redis.call('zadd', KEYS[3], score, ARGV[2])
    redis.call('lrem', KEYS[2], 0, ARGV[2])
    redis.call('rpush', KEYS[2], ARGV[2])
  end
  local live = tonumber(ARGV[3])
  redis.call('zadd', KEYS[5], now + live, ARGV[2])
  if ARGV[10] ~= '' then
    local initial, client = string.match(ARGV[10], '^(%d+);(.*)$')
    redis.call('hset', KEYS[6], ARGV[2], initial .. ';' .. ARGV[8] .. ';' .. client .. ';' ..
      ARGV[9])
    redis.call('pexpire', KEYS[6], live)
  end
end
-- The last token issued in the lock's slot: a hand-off message to this caller with a token at
-- or below it was sent before this attempt, so it ran out or was given back since.
local issued = redis.call('get', KEYS[4]) or ''
if exists == 0 then
  return {0, -2, issued}
end
return {0, redis.call('pttl', KEYS[1]), issued}
