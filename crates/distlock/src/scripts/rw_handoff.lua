-- rw_handoff.lua: direct hand-off of a read-write lock's write lock to queued distlock
-- writers. Not a script of its own: scripts/mod.rs joins it (after prelude.lua and
-- handoff.lua, whose now_ms, next_token, expire_or_undo and queue_helpers it uses) in front
-- of the read-write scripts that take, free or leave the lock, at build time; it reads no KEYS
-- or ARGV and returns nothing, it only defines local functions.
--
-- The queue is distlock's own (Redisson's RReadWriteLock has none), in the lock's hash slot,
-- kept as the plain lock's (handoff.lua's enqueue, dequeue, first_live_waiter):
--   distlock_rwlock_queue:{<name>}    zset  waiting writer (owner) -> ticket (server ms at
--                                           arrival; a later arrival always scores higher)
--   distlock_rwlock_waiters:{<name>}  hash  waiting writer -> '<deadline_ms>;<initial_ms>;
--                                           <client-id>;': its liveness deadline in server ms
--                                           (renewed by every attempt), the lease a hand-off
--                                           grants it, and where the grant is announced
-- A queued writer is also in the waiting-writers zset distlock_rwlock_writers:{<name>}, which
-- holds new readers back. Both queue keys expire with the last live entry.
--
-- rw_queue_head(queue, waiters)
--          The first live queued writer and its entry, and queue_helpers() (dead writers
--          before it are removed); nil when nobody is queued. One EXISTS when the queue is
--          absent.
--
-- rw_grant(q, lock, counter, floor, queue, waiters, writers, owner, entry)
--          Write owner's write hold on the free lock (mode 'write', '<owner>:write' = 1, a
--          fresh token from next_token with counter and floor, a lease of the entry's
--          initial_ms cut to what is left until its liveness deadline), take owner out of the
--          queue and of the waiting writers, and announce the grant 'h;<token>;<lease>;
--          <owner>' on its client's grant channel (handoff.lua's announce). q is
--          queue_helpers(). Returns true; false (nothing granted, the lock deleted again)
--          when the server refuses the PEXPIRE.
--
-- rw_hand_off(lock, counter, floor, queue, waiters, writers)
--          The lock was just freed: grant it to the first live queued writer, if any.
--          Returns whether it did.
--
-- rw_write_gone(lock, channel, message, counter, floor, queue, waiters, writers)
--          An owner's last write hold was just deleted from lock. With no other hold left,
--          the lock is deleted and handed to the first live queued writer (rw_hand_off), or,
--          with nobody queued, message is published on channel; with read holds left (a
--          downgrade), the mode becomes 'read' and message is published.
--
-- Returns  (nothing: helpers only)
-- Errors   WRONGTYPE from the commands when a key holds another type; the token errors of
--          next_token (prelude.lua).

local function rw_queue_head(queue, waiters)
  if redis.call('exists', queue) == 0 then
    return nil
  end
  local q = queue_helpers()
  local head, entry = q.first_live_waiter(queue, waiters, now_ms())
  return head, entry, q
end

local function rw_grant(q, lock, counter, floor, queue, waiters, writers, owner, entry)
  local deadline, initial, client = string.match(entry, '^(%d+);(%d+);([^;]*)')
  -- No longer than the writer's liveness deadline: a writer that died after its last attempt
  -- keeps the lock no longer than it would have kept its place.
  initial = math.max(1, math.min(tonumber(initial), tonumber(deadline) - now_ms()))
  local token = next_token(counter, floor)
  redis.call('hset', lock, 'mode', 'write', owner .. ':write', 1)
  if expire_or_undo(lock, initial, lock) then
    return false
  end
  q.dequeue(queue, waiters, owner)
  redis.call('zrem', writers, owner)
  q.announce(lock, client, token, initial, owner)
  return true
end

local function rw_hand_off(lock, counter, floor, queue, waiters, writers)
  local head, entry, q = rw_queue_head(queue, waiters)
  if not head then
    return false
  end
  return rw_grant(q, lock, counter, floor, queue, waiters, writers, head, entry)
end

local function rw_write_gone(lock, channel, message, counter, floor, queue, waiters, writers)
  if redis.call('hlen', lock) <= 1 then
    redis.call('del', lock)
    if not rw_hand_off(lock, counter, floor, queue, waiters, writers) then
      publish(channel, message)
    end
  else
    redis.call('hset', lock, 'mode', 'read')
    publish(channel, message)
  end
end
