-- fair.lua: helpers shared by the fair-lock scripts. Not a script of its own: scripts/mod.rs
-- joins it (after prelude.lua and handoff.lua, whose queue_helpers().hand_over and .announce
-- it uses) in front of fair_acquire.lua, fair_release.lua and fair_leave.lua at build time;
-- it reads no KEYS or ARGV and returns nothing, it only defines local functions.
--
-- The queue is Redisson's RedissonFairLock layout, shared with Java clients: the list
-- redisson_lock_queue:{<key>} (waiters, head first) and the zset redisson_lock_timeout:{<key>}
-- (waiter -> Redisson's score: ms since the epoch after which Redisson takes the waiter for
-- dead). Scores follow Redisson's arithmetic exactly, so Redisson clients (whatever their
-- clock, within a waiter's wait) keep distlock waiters in line: a new waiter scores
-- <score of the last waiter> + <its wait>, or <now> + <lock PTTL> + <its wait> when first; a
-- grant lowers every remaining score by the grantee's wait; a waiter that gives up lowers
-- the scores behind it by its wait. distlock waiters also have a liveness deadline in server
-- time in the distlock-only zset distlock_fair_liveness:{<key>}, renewed by each of their
-- attempts, so a crashed distlock waiter is passed over within seconds. A distlock waiter
-- that takes a direct hand-off also has an entry in the distlock-only hash
-- distlock_fair_waiters:{<key>}: owner -> '<initial_ms>;<wait_ms>;<client-id>;<app>;<host>;
-- <pid>' (the lease a hand-off grants it, its whole wait for Redisson's score arithmetic, and
-- what the grant message and the holder field need), renewed with its liveness deadline; the
-- hash expires a liveness timeout after the last renewal.
--
-- drop_stale_heads(queue, timeouts, liveness, waiters, now)
--          Remove dead waiters from the head of the queue: a distlock waiter whose liveness
--          deadline is at or before now (ms), any other waiter whose Redisson score is (or
--          that has no score at all). Deletes the liveness zset and the waiters hash once the
--          queue is empty. Returns whether any waiter was removed.
--
-- queue_score(queue, timeouts, lock, owner, wait, now)
--          Redisson's score for owner joining the queue's tail with a wait of `wait` ms.
--
-- shift_scores(timeouts, by)
--          A grant: every waiter's score minus `by` ms (the grantee's wait), as Redisson's.
--
-- leave_queue(queue, timeouts, liveness, waiters, owner, wait)
--          Redisson's acquireFailed: the scores of the waiters behind owner minus `wait`, then
--          owner out of the queue, the scores, the liveness zset and the waiters hash.
--          Returns 1 when owner had a score (was queued), else 0.
--
-- serve_head(lock, queue, timeouts, liveness, waiters, counter, floor, prefix, wake)
--          The lock is free: a head waiter with an entry in the waiters hash is handed the
--          lock (handoff.lua's hand_over: hold count 1, a fresh token from counter and floor,
--          the holder field, a lease of its initial_ms, at most what is left until its
--          liveness deadline), taken out of the queue with Redisson's grant arithmetic, and
--          told on its client's grant channel (handoff.lua's announce). Any other head (a
--          Redisson waiter, a distlock waiter without hand-off) is sent '0' on its own
--          channel <prefix>:<owner> when wake is true. Returns whether it handed the lock
--          over. Call it after drop_stale_heads: it does not check the head's liveness.
--
-- Returns  (nothing: helpers only)
-- Errors   WRONGTYPE from the commands when a key holds another type; the token errors of
--          next_token (prelude.lua).

local function drop_stale_heads(queue, timeouts, liveness, waiters, now)
  local dropped = false
  while true do
    local first = redis.call('lindex', queue, 0)
    if first == false then
      -- No waiter left, so no liveness or entries either (they may still list distlock
      -- waiters that a Redisson script dropped).
      redis.call('del', liveness, waiters)
      return dropped
    end
    local live = redis.call('zscore', liveness, first)
    local stale
    if live ~= false then
      stale = tonumber(live) <= now
    else
      local score = redis.call('zscore', timeouts, first)
      stale = score == false or tonumber(score) <= now
    end
    if not stale then
      return dropped
    end
    redis.call('lpop', queue)
    redis.call('zrem', timeouts, first)
    redis.call('zrem', liveness, first)
    redis.call('hdel', waiters, first)
    dropped = true
  end
end

local function queue_score(queue, timeouts, lock, owner, wait, now)
  local last = redis.call('lindex', queue, -1)
  local last_score = false
  if last ~= false and last ~= owner then
    last_score = redis.call('zscore', timeouts, last)
  end
  local ttl
  if last_score ~= false then
    ttl = tonumber(last_score) - now
  else
    ttl = redis.call('pttl', lock)
  end
  return ttl + wait + now
end

local function shift_scores(timeouts, by)
  if by == 0 then
    return
  end
  local waiters = redis.call('zrange', timeouts, 0, -1)
  for i = 1, #waiters do
    redis.call('zincrby', timeouts, -by, waiters[i])
  end
end

local function leave_queue(queue, timeouts, liveness, waiters, owner, wait)
  local queued = redis.call('lrange', queue, 0, -1)
  local behind = false
  for i = 1, #queued do
    if behind and wait ~= 0 then
      redis.call('zincrby', timeouts, -wait, queued[i])
    elseif queued[i] == owner then
      behind = true
    end
  end
  local removed = redis.call('zrem', timeouts, owner)
  redis.call('lrem', queue, 0, owner)
  redis.call('zrem', liveness, owner)
  redis.call('hdel', waiters, owner)
  return removed
end

local function serve_head(lock, queue, timeouts, liveness, waiters, counter, floor, prefix, wake)
  local head = redis.call('lindex', queue, 0)
  if head == false then
    return false
  end
  local entry = redis.call('hget', waiters, head)
  local initial, wait, client, meta
  if entry then
    initial, wait, client, meta = string.match(entry, '^(%d+);(%d+);([^;]*);(.*)$')
  end
  if initial then
    local q = queue_helpers()
    local token
    token, initial = q.hand_over(lock, counter, floor, nil, head, initial,
      redis.call('zscore', liveness, head), meta)
    -- nil: the server refused PEXPIRE (ACL); the head is woken instead.
    if token then
      redis.call('lpop', queue)
      redis.call('zrem', timeouts, head)
      redis.call('zrem', liveness, head)
      redis.call('hdel', waiters, head)
      shift_scores(timeouts, tonumber(wait))
      q.announce(lock, client, token, initial, head)
      return true
    end
  end
  if wake then
    -- pcall: a user without rights on the channel (NOPERM) still gets the result of what
    -- was done; waiters re-check on their own.
    publish(prefix .. ':' .. head, 0)
  end
  return false
end
