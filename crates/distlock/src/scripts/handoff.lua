-- handoff.lua: direct hand-off helpers of the plain lock (and the grant message of the fair
-- lock's). Not a script of its own: scripts/mod.rs joins it (after prelude.lua, whose
-- next_token, now_ms and holder_value it uses) in front of lock_acquire.lua,
-- lock_release.lua and lock_leave.lua, and of the fair-lock scripts, at build time; it reads
-- no KEYS or ARGV and returns nothing, it only defines local functions.
--
-- The wait queue is distlock's own (Redisson's RLock has none), in the lock's hash slot:
--   distlock_lock_queue:{<key>}    zset  waiting owner -> ticket (server ms at arrival; a
--                                        later arrival always scores higher)
--   distlock_lock_waiters:{<key>}  hash  waiting owner -> '<deadline_ms>;<initial_ms>;
--                                        <client-id>;<app>;<host>;<pid>': the liveness
--                                        deadline in server ms (renewed by every attempt of
--                                        the waiter), the lease a hand-off grants it, and what
--                                        the grant message and the holder field need
-- With a bound on re-takes (Handoff::Retakes), the waiters hash also holds
--   distlock:retakes               the number of grants in a row that passed the queue's
--                                  head; reset by a grant to the head
-- The lock hash carries the queued field (distlock:queued, value '1') whenever a distlock
-- holder holds the lock while the queue may have a waiter: written by lock_acquire.lua when
-- it queues a waiter behind a holder and when it grants the lock while the queue exists, and
-- by grant_to when the queue outlives its hand-off; it goes with the key. So the fast release
-- (lock_release_fast.lua), finding no such field, frees the lock without reading the queue;
-- a field left after the queue emptied only sends that release to lock_release.lua.
-- Both keys expire with the last live entry (their TTL is reset to the liveness timeout by
-- every attempt of a waiter), so a queue whose waiters all died leaves nothing behind. A
-- hand-off grants the first live waiter the lock (hold count 1, a fresh fencing token, the
-- holder field, a lease of its initial_ms, at most what is left until its liveness deadline)
-- and publishes 'h;<token>;<lease ms>;<owner>' on '<grant prefix>:<client-id>'.
--
-- The common paths (a free lock with nobody queued, a final release with nobody queued) use
-- only hand_off's first EXISTS: every other helper is made by queue_helpers() on the path
-- that needs it, since defining a Lua function costs server time on every run that reaches
-- its definition.
--
-- TOKEN_FIELD, HOLDER_FIELD
--          The lock hash's fencing-token field (distlock:fencing-token) and holder field
--          (distlock:holder), as the client's distlock::layout constants.
--
-- QUEUED_FIELD
--          The lock hash's queued field (distlock:queued), as distlock::layout::QUEUED_FIELD.
--
-- queue_helpers()
--          A table of the helpers below (announce, hand_over, first_live_waiter, dequeue,
--          enqueue, grant_to, retake, hand_off_now) and RETAKES, made on each call. The
--          fair-lock scripts (fair.lua) use its hand_over and announce for their own queue's
--          hand-offs.
--
-- announce(lock, client, token, initial, owner)
--          Publish the grant message 'h;<token>;<initial>;<owner>' of a hand-off on
--          distlock_lock_grant:{<lock>}:<client> (the braces left out when the lock key has a
--          hash tag of its own, as the client's distlock::layout::lock_grant_channel).
--
-- hand_over(lock, counter, floor, fenced, owner, initial, deadline, meta)
--          Write owner's hold of the free lock: count 1, a fresh token (next_token with
--          counter, floor and fenced), the holder field from meta, and a lease of initial ms,
--          cut to what is left until deadline (server ms; nil: no cut). Returns the token and
--          the lease set; nil (nothing written: the lock deleted again) when the server
--          refuses the PEXPIRE.
--
-- first_live_waiter(queue, waiters, now)
--          The first waiter whose liveness deadline is after now (ms), and its entry; dead
--          waiters before it are removed. nil when none is left (both keys are then gone).
--
-- dequeue(queue, waiters, owner)
--          owner out of the queue (no-op when it is not queued).
--
-- enqueue(queue, waiters, owner, request, meta, now)
--          owner at the tail of the queue (keeps its place when queued already). request is
--          the waiter's '<liveness_ms>;<initial_ms>;<client-id>', meta its client's
--          '<app>;<host>;<pid>': its entry's deadline is now + liveness_ms.
--
-- grant_to(lock, counter, floor, fenced, queue, waiters, owner, entry, counted)
--          Hand the free lock to the queued owner (entry as first_live_waiter returns it):
--          hand_over with its initial_ms and liveness deadline, take it out of the queue and
--          announce the grant to its client; counted (the caller's policy bounds re-takes):
--          also end the run of re-takes. The queued field is written when the queue is left
--          with an entry. (A strict-order caller leaves a count alone: a count
--          left too high only allows fewer re-takes.) Returns the token; nil (nothing granted,
--          the lock deleted again) when the server refuses the PEXPIRE.
--
-- retake(waiters, policy)
--          Whether a caller that is not the queue's head may take the free lock now: policy
--          'retake:<n>' and fewer than n such grants in a row; counts this one when it may.
--
-- hand_off(lock, counter, floor, fenced, queue, waiters, bound)
--          The lock was just freed: grant it to the first live waiter, if any. bound: '' to
--          hand off always, else '<n>': not while fewer than n grants in a row passed the
--          head (the lock stays free for a re-take). Returns whether it did. One EXISTS when
--          nobody is queued; otherwise queue_helpers().hand_off_now, with the same arguments.
--
-- Returns  (nothing: helpers only)
-- Errors   WRONGTYPE from the commands when a key holds another type; the token errors of
--          next_token (prelude.lua).

local TOKEN_FIELD, HOLDER_FIELD = 'distlock:fencing-token', 'distlock:holder'
local QUEUED_FIELD = 'distlock:queued'

local function queue_helpers()
  local RETAKES = 'distlock:retakes'

  local function first_live_waiter(queue, waiters, now)
    while true do
      local head = redis.call('zrange', queue, 0, 0)[1]
      if not head then
        redis.call('del', waiters)
        return nil
      end
      local entry = redis.call('hget', waiters, head)
      if entry then
        local deadline = tonumber(string.match(entry, '^(%d+);'))
        if deadline and deadline > now then
          return head, entry
        end
        redis.call('hdel', waiters, head)
      end
      redis.call('zrem', queue, head)
    end
  end

  local function announce(lock, client, token, initial, owner)
    -- The grant channel shares the lock's slot: braces around the key unless it has a hash
    -- tag of its own.
    local channel = 'distlock_lock_grant:{' .. lock .. '}:'
    if string.find(lock, '{', 1, true) then
      channel = 'distlock_lock_grant:' .. lock .. ':'
    end
    publish(channel .. client, 'h;' .. token .. ';' .. initial .. ';' .. owner)
  end

  local function dequeue(queue, waiters, owner)
    if redis.call('zrem', queue, owner) == 1 then
      redis.call('hdel', waiters, owner)
    end
  end

  local function enqueue(queue, waiters, owner, request, meta, now)
    if not redis.call('zscore', queue, owner) then
      local ticket = now
      local last = redis.call('zrange', queue, -1, -1, 'WITHSCORES')[2]
      if last and tonumber(last) >= ticket then
        ticket = tonumber(last) + 1
      end
      redis.call('zadd', queue, ticket, owner)
    end
    local live, rest = string.match(request, '^(%d+);(.*)$')
    live = tonumber(live)
    redis.call('hset', waiters, owner, (now + live) .. ';' .. rest .. ';' .. meta)
    redis.call('pexpire', queue, live)
    redis.call('pexpire', waiters, live)
  end

  local function hand_over(lock, counter, floor, fenced, owner, initial, deadline, meta)
    if deadline then
      -- No longer than the waiter's liveness deadline: a waiter that died (or stopped) after
      -- its last attempt keeps the lock no longer than it would have kept its place.
      initial = math.max(1, math.min(tonumber(initial), tonumber(deadline) - now_ms()))
    end
    local token = next_token(counter, floor, fenced)
    redis.call('hset', lock, owner, 1, TOKEN_FIELD, token, HOLDER_FIELD, holder_value(meta))
    if expire_or_undo(lock, initial, lock) then
      -- The server refused PEXPIRE (ACL): a lock without a TTL would outlive the waiter, so
      -- the grant is undone and the waiter stays queued.
      return nil
    end
    return token, initial
  end

  local function grant_to(lock, counter, floor, fenced, queue, waiters, owner, entry, counted)
    local deadline, initial, client, meta = string.match(entry, '^(%d+);(%d+);([^;]*);(.*)$')
    local token
    token, initial = hand_over(lock, counter, floor, fenced, owner, initial, deadline, meta)
    if not token then
      return nil
    end
    dequeue(queue, waiters, owner)
    if redis.call('exists', queue) == 1 then
      redis.call('hset', lock, QUEUED_FIELD, 1)
    end
    if counted then
      redis.call('hdel', waiters, RETAKES)
    end
    announce(lock, client, token, initial, owner)
    return token
  end

  local function retake(waiters, policy)
    local bound = tonumber(string.match(policy, '^retake:(%d+)$'))
    if not bound then
      return false
    end
    local run = tonumber(redis.call('hget', waiters, RETAKES) or '0')
    if run >= bound then
      return false
    end
    redis.call('hset', waiters, RETAKES, run + 1)
    return true
  end

  local function hand_off_now(lock, counter, floor, fenced, queue, waiters, bound)
    if bound ~= '' and tonumber(redis.call('hget', waiters, RETAKES) or '0') < tonumber(bound) then
      return false
    end
    local head, entry = first_live_waiter(queue, waiters, now_ms())
    if not head then
      return false
    end
    return grant_to(lock, counter, floor, fenced, queue, waiters, head, entry, bound ~= '') ~= nil
  end

  return {
    RETAKES = RETAKES,
    announce = announce,
    hand_over = hand_over,
    first_live_waiter = first_live_waiter,
    dequeue = dequeue,
    enqueue = enqueue,
    grant_to = grant_to,
    retake = retake,
    hand_off_now = hand_off_now,
  }
end

local function hand_off(lock, counter, floor, fenced, queue, waiters, bound)
  if redis.call('exists', queue) == 0 then
    return false
  end
  return queue_helpers().hand_off_now(lock, counter, floor, fenced, queue, waiters, bound)
end
