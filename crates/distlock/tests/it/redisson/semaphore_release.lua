-- Redisson fixture: RedissonPermitExpirableSemaphore.tryReleaseAsync(String permitId), the
-- single-permit release behind release(id) / tryRelease(id) (codec LongCodec).
-- Redisson 4.7 (scripts unchanged since 3.52), written from the behaviour of Redisson's
-- source (read, not copied).
--
-- KEYS[1]  available-permits counter: the semaphore name
-- KEYS[2]  channel redisson_sc:{name}   (note: the channel is KEYS[2] in this script)
-- KEYS[3]  leases {name}:timeout
-- ARGV[1]  permit id, 16 raw bytes (the client decodes its 32-hex-character id)
-- ARGV[2]  1 (permits given back)
-- ARGV[3]  now: client System.currentTimeMillis()
-- ARGV[4]  publish command: PUBLISH
--
-- Returns  1  given back while its lease was running
--          0  unknown id (release(id) throws IllegalArgumentException), or the lease had
--             already ended (the permit is still counted back)
-- Publishes the new counter value on the channel, unconditionally, when the id was found.

local expire = redis.call('zscore', KEYS[3], ARGV[1])
local removed = redis.call('zrem', KEYS[3], ARGV[1])
if removed ~= 1 then
  return 0
end
local value = redis.call('incrby', KEYS[1], ARGV[2])
redis.call(ARGV[4], KEYS[2], value)
if tonumber(expire) <= tonumber(ARGV[3]) then
  return 0
end
return 1
