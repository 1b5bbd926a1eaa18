-- leased_release_fast.lua: leased_release.lua's give-back of a leased permit when nobody
-- queues for a hand-off, and nothing else; nil: nothing changed, send leased_release.lua.
-- Sent only for a permit whose lease its holder still counts on (the client's reckoning ends
-- before the server's expiry, by the drift margin), so its lease is running: no TIME is read
-- to tell an ended lease apart, as the full script does.
-- KEYS[1] semaphore key <name> (string: available permits)
-- KEYS[2] leases {<name>}:timeout (zset: 16-byte permit id -> expiry, ms)
-- ARGV[1] permit id: 16 raw bytes
-- Returns 1 given back, the count then published on redisson_sc:{<name>} as Redisson's release
--         publishes it; or nil when the hand-off queue exists or the id is not leased (given
--         back already, reclaimed, or never taken: the full script answers GONE). The leases
--         key of older distlock versions is left to the full scripts (this id is in KEYS[2]).
-- Errors  WRONGTYPE when KEYS[2] holds another type (before any write).

local key = KEYS[1]
-- The helper keys' hash tag, as `keys::prefixed` puts it after their prefix.
local tag = key
if not string.find(key, '{', 1, true) then
  tag = '{' .. key .. '}'
end
if redis.call('exists', 'distlock_permit_queue:' .. tag) == 1 then
  return nil
end
if redis.call('zrem', KEYS[2], ARGV[1]) == 0 then
  return nil
end
publish('redisson_sc:' .. tag, redis.call('incrby', key, 1))
return 1
