-- lock_acquire.lua: grant a reentrant lock (Redisson RLock layout) and issue a fencing token.
--
-- Redisson's tryLockInnerAsync plus two distlock additions: a fencing
-- token issued in the same script, and idempotency under a resent request.
--
-- KEYS[1]  lock key: hash, field <client-uuid>:<owner-id> -> hold count, the token field
--          (ARGV[5]) and the holder field (ARGV[7]), TTL = lease
-- KEYS[2]  fencing counter of the lock's slot (string, same slot):
--          <prefix>distlock:fencing-counter:{<slot tag>}, last token issued in the slot
-- KEYS[3]  acquire latch (string, same slot): result of this request, for resends
-- KEYS[4]  Redisson RFencedLock's token counter of this lock, redisson_lock_token:{<key>}
--          (string, same slot): when it exists, a grant's token is above it and is written
--          to it (see prelude.lua's next_token); never created here
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field <client-uuid>:<owner-id>
-- ARGV[3]  mode: 'new'    fresh owner minted for this call: if the field already exists,
--                         this is a resend of a request that was granted; answer again
--                         without counting a second hold
--                'as'     acquire with a caller-given owner: grant if free, +1 if held by
--                         this owner (idempotent through the latch)
--                'nested' like 'as' but only if this owner holds the lock now (re-entry)
-- ARGV[4]  latch TTL in milliseconds (modes 'as' and 'nested')
-- ARGV[5]  name of the token field inside the lock hash
-- ARGV[6]  token floor of a new counter: the legacy server-wide counter's value read by the
--          client at connect, '0' if none (decimal string; used only when KEYS[2] does not
--          exist yet); '<generation>:<floor>' carries a token generation above 0 (Sentinel:
--          the master's config epoch; see prelude.lua's next_token)
-- ARGV[7]  name of the holder field inside the lock hash (distlock:holder): written on a
--          grant to a new holder (a free lock), never on a re-entry or a resend; it goes with
--          the key on the last release
-- ARGV[8]  the client's holder metadata '<app>;<host>;<pid>': the holder field is
--          '<ARGV[8]>;<server time in s>' (prelude.lua's holder_value)
-- KEYS[5]  the direct hand-off queue distlock_lock_queue:{<key>} (zset, same slot; see
--          handoff.lua)
-- KEYS[6]  its waiter entries distlock_lock_waiters:{<key>} (hash, same slot)
-- ARGV[9]  hand-off policy: 'fifo' a free lock whose queue has a live waiter is not granted
--                                  to anyone else: it is handed to that waiter now, and the
--                                  caller is refused (and queued, if ARGV[10] says so)
--                           'retake:<n>' as 'fifo', except that while fewer than n grants
--                                  in a row passed the queue's head, the caller is granted
--                                  (and leaves the queue if it was in it); see handoff.lua
--                           'off'  a free lock is granted whoever is queued (barging)
-- ARGV[10] queue entry of a waiting caller (mode 'new' only): '' to not queue (a single
--          attempt), else '<liveness_ms>;<initial_ms>;<client-id>': refused, the caller joins
--          the queue's tail (or renews its liveness deadline there)
-- ARGV[11] grant channel prefix distlock_lock_grant:{<key>}: a hand-off to a waiter is
--          published on '<ARGV[11]>:<client-id>'
--
-- Returns  {1, hold_count, fencing_token}  granted (or re-entered); the token as a string:
--                                           '<sequence>' (decimal, at most 2^63 - 1) or
--                                           '<generation>:<sequence>'
--          {0, pttl, token}                 held by another owner; pttl in ms (-1: no TTL);
--                                           also after a hand-off to the first waiter; the
--                                           holder's fencing token ('' when it has none: a
--                                           Redisson hold): a waiter's hand-off message with
--                                           a token at or below it is stale
--          {-1}                             mode 'nested': the lock is gone; modes 'as',
--                                           'nested': a resend whose first send was
--                                           granted, but the hold has ended since
--          {-2}                             mode 'nested': another owner holds it
--          {-4}                             modes 'as', 'nested': this request was cancelled
--                                           by latch_cancel.lua before it ran
-- Errors   WRONGTYPE when KEYS[1] holds another type; raised before any write.
--          'ERR distlock: fencing counter ...' when the counter cannot issue a token (not a
--          decimal integer, or at 2^63 - 1): raised before any write (prelude.lua).
--          A refused PEXPIRE (e.g. NOPERM) is answered as an error with nothing granted: on
--          a new key the key is deleted again; on a held key PEXPIRE runs before any write.
--
-- Uses next_token, held_token, holder_value and expire_or_undo from prelude.lua and the queue
-- helpers of handoff.lua (joined in front by scripts/mod.rs). A hold that Redisson made (no token field) is given a token on
-- re-entry (but no holder field: it records only grants made here).
-- Cost: the free-lock path (the common one) runs EXISTS (lock and queue in one call), TIME,
-- SET..GET, GET, HSET, PEXPIRE; the
-- token is built from TIME's two parts by string arithmetic; SET..GET needs Redis 6.2.

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
    return {1, tonumber(prior), held_token(KEYS[1], ARGV[5], KEYS[2], ARGV[6], KEYS[4])}
  end
end

-- One EXISTS for the lock and its queue: 0 (the common case) means free with nobody queued.
local found = redis.call('exists', KEYS[1], KEYS[5])
if found == 0 or (found == 1 and redis.call('exists', KEYS[1]) == 0) then
  if mode == 'nested' then
    return {-1}
  end
  if found == 1 and ARGV[9] ~= 'off' then
    -- Free, with waiters queued: the first live one goes first (unless a re-take is due).
    local now = now_ms()
    local head, entry = first_live_waiter(KEYS[5], KEYS[6], now)
    if head and head ~= ARGV[2] and retake(KEYS[6], ARGV[9]) then
      dequeue(KEYS[5], KEYS[6], ARGV[2])
    elseif head and head ~= ARGV[2] then
      local token = grant_to(KEYS[1], KEYS[2], ARGV[6], KEYS[4], KEYS[5], KEYS[6], ARGV[11],
                             head, entry, ARGV[9] ~= 'fifo')
      if token then
        if ARGV[10] ~= '' then
          enqueue(KEYS[5], KEYS[6], ARGV[2], ARGV[10], ARGV[8], now)
        end
        return {0, redis.call('pttl', KEYS[1]), token}
      end
    elseif head then
      dequeue(KEYS[5], KEYS[6], ARGV[2])
      if ARGV[9] ~= 'fifo' then
        redis.call('hdel', KEYS[6], RETAKES)
      end
    end
  end
  -- Free: grant. Token = max(last + 1, server time in microseconds), so tokens keep rising
  -- after a restart from an old snapshot or a failover to a lagging replica.
  local token = next_token(KEYS[2], ARGV[6], KEYS[4])
  redis.call('hset', KEYS[1], ARGV[2], 1, ARGV[5], token, ARGV[7], holder_value(ARGV[8]))
  local err = expire_or_undo(KEYS[1], ARGV[1], KEYS[1])
  if err then
    return err
  end
  if mode ~= 'new' then
    redis.call('set', KEYS[3], 1, 'px', ARGV[4])
  end
  return {1, 1, token}
end

if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  if mode == 'new' then
    -- A resend of a granted request, or a waiter the lock was handed to (its grant message
    -- lost, or not read yet): same hold, same token, the full lease.
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1, tonumber(redis.call('hget', KEYS[1], ARGV[2])),
            held_token(KEYS[1], ARGV[5], KEYS[2], ARGV[6], KEYS[4])}
  end
  -- PEXPIRE first: when the server refuses it, nothing has been written.
  local err = expire_or_undo(KEYS[1], ARGV[1])
  if err then
    return err
  end
  local count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('set', KEYS[3], count, 'px', ARGV[4])
  return {1, count, held_token(KEYS[1], ARGV[5], KEYS[2], ARGV[6], KEYS[4])}
end

if mode == 'nested' then
  return {-2}
end
if ARGV[10] ~= '' then
  enqueue(KEYS[5], KEYS[6], ARGV[2], ARGV[10], ARGV[8], now_ms())
end
return {0, redis.call('pttl', KEYS[1]), redis.call('hget', KEYS[1], ARGV[5]) or ''}
