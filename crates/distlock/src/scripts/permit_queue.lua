-- permit_queue.lua: direct hand-off helpers of the leased semaphore. Not a script of its own:
-- scripts/mod.rs joins it (after prelude.lua and leases.lua) in front of leased_acquire.lua
-- and leased_release.lua at build time; it reads no KEYS or ARGV and returns nothing, it only
-- defines local functions.
--
-- The wait queue is distlock's own (Redisson's RPermitExpirableSemaphore has none), in the
-- semaphore's slot:
--   distlock_permit_queue:{<key>}    zset  waiting permit id (16 raw bytes) -> ticket (server
--                                          ms at arrival; a later arrival always scores higher)
--   distlock_permit_waiters:{<key>}  hash  waiting permit id -> '<deadline_ms>;<lease_ms>;
--                                          <client-id>;<id as 32 hex characters>': the
--                                          liveness deadline in server ms (renewed by every
--                                          attempt of the waiter), the lease it asked for, and
--                                          where its grant message goes
-- Both keys expire with the last live entry (their TTL is reset to the liveness timeout by
-- every attempt of a waiter), so a queue whose waiters all died leaves nothing behind.
--
-- A hand-off grants the first live waiter a permit under the id it asked for: the permit
-- leaves the available count and enters the leases zset with an expiry of now + its lease,
-- cut to its liveness deadline (a waiter that died after its last attempt keeps the permit
-- no longer than it would have kept its place; the waiter extends a cut lease to the one it
-- asked for when the message arrives). The grant message 'h;<expiry>;<lease ms>;<hex id>'
-- goes to distlock_permit_grant:{<key>}:<client-id> (the braces left out when the key has a
-- hash tag of its own, as the client's distlock::layout::permit_grant_channel).
--
-- permit_queue()
--          A table of the helpers below, made on each call (only the paths that find a queue
--          make it: defining a Lua function costs server time on every run that reaches its
--          definition).
--
-- enqueue(queue, waiters, id, entry, now)
--          id at the tail of the queue (it keeps its place when queued already). entry is the
--          waiter's '<liveness_ms>;<lease_ms>;<client-id>;<hex id>': its deadline is
--          now + liveness_ms.
--
-- dequeue(queue, waiters, id)
--          id out of the queue (no-op when it is not queued).
--
-- serve(sem, leases, queue, waiters, available, now, stop)
--          Grant one permit each to the live waiters at the head of the queue, in order,
--          while available (the semaphore's count, a number) is at least 1, and stop at the
--          waiter stop (nil: none), which is not granted. Dead waiters met on the way are
--          removed. Returns the count left.
--
-- Returns  (nothing: helpers only)
-- Errors   WRONGTYPE from the commands when a key holds another type.
--
-- Uses now_ms (prelude.lua) and lease_permit (leases.lua).

local function permit_queue()
  local function dequeue(queue, waiters, id)
    if redis.call('zrem', queue, id) == 1 then
      redis.call('hdel', waiters, id)
    end
  end

  local function enqueue(queue, waiters, id, entry, now)
    if not redis.call('zscore', queue, id) then
      local ticket = now
      local last = redis.call('zrange', queue, -1, -1, 'WITHSCORES')[2]
      if last and tonumber(last) >= ticket then
        ticket = tonumber(last) + 1
      end
      redis.call('zadd', queue, ticket, id)
    end
    local live, rest = string.match(entry, '^(%d+);(.*)$')
    live = tonumber(live)
    redis.call('hset', waiters, id, (now + live) .. ';' .. rest)
    redis.call('pexpire', queue, live)
    redis.call('pexpire', waiters, live)
  end

  local function announce(sem, client, expiry, lease, hex)
    -- The grant channel shares the semaphore's slot: braces around the key unless it has a
    -- hash tag of its own.
    local channel = 'distlock_permit_grant:{' .. sem .. '}:'
    if string.find(sem, '{', 1, true) then
      channel = 'distlock_permit_grant:' .. sem .. ':'
    end
    publish(channel .. client, 'h;' .. expiry .. ';' .. lease .. ';' .. hex)
  end

  local function serve(sem, leases, queue, waiters, available, now, stop)
    while available >= 1 do
      local head = redis.call('zrange', queue, 0, 0)[1]
      if not head then
        redis.call('del', waiters)
        return available
      end
      if head == stop then
        return available
      end
      local entry = redis.call('hget', waiters, head)
      dequeue(queue, waiters, head)
      local deadline, lease, client, hex
      if entry then
        deadline, lease, client, hex = string.match(entry, '^(%d+);(%d+);([^;]*);(.*)$')
      end
      deadline = tonumber(deadline)
      if deadline and deadline > now then
        lease = math.max(1, math.min(tonumber(lease), deadline - now))
        redis.call('decrby', sem, 1)
        lease_permit(sem, leases, head, now + lease)
        available = available - 1
        announce(sem, client, now + lease, lease, hex)
      end
    end
    return available
  end

  return {
    dequeue = dequeue,
    enqueue = enqueue,
    serve = serve,
  }
end
