-- lock_acquire.lua: grant a reentrant lock (Redisson RLock layout) and issue a fencing token.
--
-- The common case, a fresh owner's first attempt at a free lock nobody queues for, is
-- lock_acquire_fast.lua's, sent first; this script does it alike when that one answers nil
-- or is not sent (a resend, a re-entry, a token generation, a lock handle that met
-- contention lately).
--
-- Redisson's tryLockInnerAsync plus two distlock additions: a fencing
-- token issued in the same script, and idempotency under a resent request.
--
-- KEYS[1]  lock key: hash, field <client-uuid>:<owner-id> -> hold count, the token field
--          (distlock:fencing-token) and the holder field (distlock:holder), TTL = lease;
--          the queued field (distlock:queued, handoff.lua) when a waiter is queued behind the
--          holder or the lock is granted while its queue has entries
-- KEYS[2]  fencing counter of the lock's slot (string, same slot):
--          <prefix>distlock:fencing-counter:{<slot tag>}, last token issued in the slot
-- KEYS[3]  acquire latch (string, same slot): result of this request, for resends (mode
--          'new' reads none: any key of the slot may be passed)
-- KEYS[4]  Redisson RFencedLock's token counter of this lock, redisson_lock_token:{<key>}
--          (string, same slot): when it exists, a grant's token is above it and is written
--          to it (see prelude.lua's next_token); never created here
-- KEYS[5]  the direct hand-off queue distlock_lock_queue:{<key>} (zset, same slot; see
--          handoff.lua)
-- KEYS[6]  its waiter entries distlock_lock_waiters:{<key>} (hash, same slot)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field <client-uuid>:<owner-id>
-- ARGV[3]  mode: 'new'    fresh owner minted for this call: if the field already exists,
--                         this is a resend of a request that was granted; answer again
--                         without counting a second hold
--                'as'     acquire with a caller-given owner: grant if free, +1 if held by
--                         this owner (idempotent through the latch)
--                'nested' like 'as' but only if this owner holds the lock now (re-entry)
-- ARGV[4]  latch TTL in milliseconds (modes 'as' and 'nested')
-- ARGV[5]  token floor of a new counter: the legacy server-wide counter's value read by the
--          client at connect, '0' if none (decimal string; used only when KEYS[2] does not
--          exist yet); '<generation>:<floor>' carries a token generation above 0 (Sentinel:
--          the master's config epoch; see prelude.lua's next_token)
-- ARGV[6]  the client's holder metadata '<app>;<host>;<pid>': a grant to a new holder (a
--          free lock) writes the holder field '<ARGV[6]>;<server time in s>' (prelude.lua's
--          holder_value), never a re-entry or a resend; it goes with the key on the last
--          release
-- ARGV[7]  hand-off policy: 'fifo' a free lock whose queue has a live waiter is not granted
--                                  to anyone else: it is handed to that waiter now, and the
--                                  caller is refused (and queued, if ARGV[8] says so)
--                           'retake:<n>' as 'fifo', except that while fewer than n grants
--                                  in a row passed the queue's head, the caller is granted
--                                  (and leaves the queue if it was in it); see handoff.lua
--                           'off'  a free lock is granted whoever is queued (barging)
-- ARGV[8]  queue entry of a waiting caller (mode 'new' only): '' to not queue (a single
--          attempt), else '<liveness_ms>;<initial_ms>;<client-id>': refused, the caller joins
--          the queue's tail (or renews its liveness deadline there); a hand-off to it is
--          published on distlock_lock_grant:{<key>}:<client-id> (handoff.lua)
--
-- Returns  {1, hold_count, fencing_token}  granted (or re-entered); the token as a string:
--                                           '<sequence>' (decimal, at most 2^63 - 1) or
--                                           '<generation>:<sequence>'
--          {0, pttl, token}                 held by another owner; pttl in ms (-1: no TTL);
--                                           also after a hand-off to the first waiter; the
--                                           holder's fencing token, or for a holder without
--                                           one (a Redisson hold) the slot counter's value
--                                           as stored ('' when neither; the client reads
--                                           the token in it): a waiter's hand-off message
--                                           with a token at or below it is stale
--          {GONE}                           mode 'nested': the lock is gone; modes 'as',
--                                           'nested': a resend whose first send was
--                                           granted, but the hold has ended since
--          {HELD_BY_OTHER}                  mode 'nested': another owner holds it
--          {CANCELLED}                      modes 'as', 'nested': this request was cancelled
--                                           by latch_cancel.lua before it ran
-- Errors   WRONGTYPE when KEYS[1] holds another type, or another kind's hash (a read-write
--          lock's, with a mode field): 'WRONGTYPE distlock: the key holds …' (kinds.lua's
--          wrong_kind), raised before any write.
--          'ERR distlock: fencing counter ...' when the counter cannot issue a token (not a
--          decimal integer, or at 2^63 - 1): raised before any write (prelude.lua).
--          A refused PEXPIRE (e.g. NOPERM) is answered as an error with nothing granted: on
--          a new key the key is deleted again; on a held key PEXPIRE runs before any write.
--
-- Uses next_token, held_token, holder_value and expire_or_undo from prelude.lua and the queue
-- helpers of handoff.lua (joined in front by scripts/mod.rs). A hold that Redisson made (no
-- token field) is given a token on re-entry (but no holder field: it records only grants made
-- here).
-- Cost: the free-lock path (the common one) runs EXISTS (the lock, its queue and Redisson's
-- counter in one call), TIME, SET..GET, HSET, PEXPIRE and defines no queue helper; the token
-- is built from TIME's two parts by string arithmetic; SET..GET needs Redis 6.2.

local mode = ARGV[3]
if mode ~= 'new' then
  local prior = redis.call('get', KEYS[3])
  if prior and string.sub(prior, 1, 7) == 'undone:' then
    -- Cancelled by its caller (latch_cancel.lua) before it ran: do nothing.
    return {-4}
  end
  if prior then
    if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
      return {-1}
    end
    return {1, tonumber(prior), held_token(KEYS[1], TOKEN_FIELD, KEYS[2], ARGV[5], KEYS[4])}
  end
end

-- One EXISTS for the lock, its queue and Redisson's token counter: 0 (the common case) means
-- free, with nobody queued and no counter to read. pcall: a user whose ACL does not cover
-- Redisson's counter asks about the other two (next_token then reads the counter as absent).
local found = redis.pcall('exists', KEYS[1], KEYS[5], KEYS[4])
local fenced, pttl, queued = nil, -2, false
if type(found) == 'table' then
  found = redis.call('exists', KEYS[1], KEYS[5])
  fenced = KEYS[4]
end
if found > 0 then
  -- Which of them: the lock's PTTL (-2: no lock) is also the reply of a refused attempt.
  fenced = KEYS[4]
  pttl = redis.call('pttl', KEYS[1])
  queued = pttl == -2 and (found == 2 or redis.call('exists', KEYS[5]) == 1)
end
if pttl == -2 then
  if mode == 'nested' then
    return {-1}
  end
  if queued and ARGV[7] ~= 'off' then
    -- Free, with waiters queued: the first live one goes first (unless a re-take is due).
    local q = queue_helpers()
    local now = now_ms()
    local head, entry = q.first_live_waiter(KEYS[5], KEYS[6], now)
    if head and head ~= ARGV[2] and q.retake(KEYS[6], ARGV[7]) then
      q.dequeue(KEYS[5], KEYS[6], ARGV[2])
    elseif head and head ~= ARGV[2] then
      local token = q.grant_to(KEYS[1], KEYS[2], ARGV[5], KEYS[4], KEYS[5], KEYS[6], head,
                               entry, ARGV[7] ~= 'fifo')
      if token then
        if ARGV[8] ~= '' then
          q.enqueue(KEYS[5], KEYS[6], ARGV[2], ARGV[8], ARGV[6], now)
          redis.call('hset', KEYS[1], QUEUED_FIELD, 1)
        end
        return {0, redis.call('pttl', KEYS[1]), token}
      end
    elseif head then
      q.dequeue(KEYS[5], KEYS[6], ARGV[2])
      if ARGV[7] ~= 'fifo' then
        redis.call('hdel', KEYS[6], q.RETAKES)
      end
    end
  end
  -- Free: grant. Token = max(last + 1, server time in microseconds), so tokens keep rising
  -- after a restart from an old snapshot or a failover to a lagging replica.
  local token = next_token(KEYS[2], ARGV[5], fenced)
  if queued and redis.call('exists', KEYS[5]) == 1 then
    -- Granted past a queue that still has entries: its release must look at them.
    redis.call('hset', KEYS[1], ARGV[2], 1, TOKEN_FIELD, token, HOLDER_FIELD,
               holder_value(ARGV[6]), QUEUED_FIELD, 1)
  else
    redis.call('hset', KEYS[1], ARGV[2], 1, TOKEN_FIELD, token, HOLDER_FIELD, holder_value(ARGV[6]))
  end
  local err = expire_or_undo(KEYS[1], ARGV[1], KEYS[1])
  if err then
    return err
  end
  if mode ~= 'new' then
    redis.call('set', KEYS[3], 1, 'px', ARGV[4])
  end
  return {1, 1, token}
end

-- Held: by this owner, by another, or the key holds another kind's data (a read-write lock's
-- hash, a semaphore's count), which is refused before anything is written.
local held = redis.pcall('hmget', KEYS[1], ARGV[2], 'mode')
if held.err or held[2] then
  return wrong_kind(KEYS[1], 'a plain lock')
end
if held[1] then
  if mode == 'new' then
    -- A resend of a granted request, or a waiter the lock was handed to (its grant message
    -- lost, or not read yet): same hold, same token, the full lease.
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1, tonumber(redis.call('hget', KEYS[1], ARGV[2])),
            held_token(KEYS[1], TOKEN_FIELD, KEYS[2], ARGV[5], KEYS[4])}
  end
  -- PEXPIRE first: when the server refuses it, nothing has been written.
  local err = expire_or_undo(KEYS[1], ARGV[1])
  if err then
    return err
  end
  local count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('set', KEYS[3], count, 'px', ARGV[4])
  return {1, count, held_token(KEYS[1], TOKEN_FIELD, KEYS[2], ARGV[5], KEYS[4])}
end

if mode == 'nested' then
  return {-2}
end
if ARGV[8] ~= '' then
  queue_helpers().enqueue(KEYS[5], KEYS[6], ARGV[2], ARGV[8], ARGV[6], now_ms())
  -- The holder's release must hand the lock to the queue (handoff.lua's queued field).
  redis.call('hset', KEYS[1], QUEUED_FIELD, 1)
end
local seen = redis.call('hget', KEYS[1], TOKEN_FIELD)
if not seen then
  -- A holder without a token (Redisson's): the last token issued in the slot bounds every
  -- hand-off made before this attempt just as well.
  seen = redis.call('get', KEYS[2]) or ''
end
return {0, pttl, seen}
