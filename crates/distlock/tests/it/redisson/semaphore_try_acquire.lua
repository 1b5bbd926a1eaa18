-- Redisson fixture: RedissonPermitExpirableSemaphore.tryAcquireAsync(List<String> ids,
-- long timeoutDate), the script behind every acquire/tryAcquire of an
-- RPermitExpirableSemaphore (codec ByteArrayCodec).
-- Redisson 4.7 (scripts unchanged since 3.52); layout of 3.23.4+ (one zset member per permit,
-- 'OK' result), written from the behaviour of Redisson's source (read, not copied).
--
-- KEYS[1]  available-permits counter: the semaphore name (string holding an integer)
-- KEYS[2]  leases: suffixName(name, "timeout") = {name}:timeout (zset, member = permit id as
--          16 raw bytes, score = expiry in ms since the epoch, client clock)
-- KEYS[3]  channel: prefixName("redisson_sc", name) = redisson_sc:{name}
-- ARGV[1]  permits: number of ids asked for (decimal)
-- ARGV[2]  timeoutDate: client now + lease ms, or 922337203685477 without a lease
-- ARGV[3]  now: client System.currentTimeMillis()
-- ARGV[4]  922337203685477 (nonExpirableTimeout)
-- ARGV[5]  publish command: PUBLISH (or SPUBLISH on sharded cluster pub/sub)
-- ARGV[6..] one raw 16-byte permit id per permit
--
-- Returns  'OK'        taken (the client then returns its own ids)
--          ':<score>'  none available; the lowest lease ends at <score> (ms): retry then or on
--                      a message
--          nil         none available and no lease will end: wait for a message

-- Reclaim expired leases, at most as many as permits asked for.
local expired = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3], 'limit', 0, ARGV[1])
if #expired > 0 then
  redis.call('zrem', KEYS[2], unpack(expired))
  local value = redis.call('incrby', KEYS[1], #expired)
  if value > 0 then
    redis.call(ARGV[5], KEYS[3], value)
  end
end

local value = redis.call('get', KEYS[1])
if value ~= false and tonumber(value) >= tonumber(ARGV[1]) then
  redis.call('decrby', KEYS[1], ARGV[1])
  for i = 6, #ARGV do
    redis.call('zadd', KEYS[2], ARGV[2], ARGV[i])
  end
  -- The leases inherit the counter's TTL (since 3.12.0).
  local ttl = redis.call('pttl', KEYS[1])
  if ttl > 0 then
    redis.call('pexpire', KEYS[2], ttl)
  end
  return 'OK'
end

local first = redis.call('zrange', KEYS[2], 0, 0, 'withscores')
if first[2] ~= nil and first[2] ~= ARGV[4] then
  return ':' .. first[2]
end
return nil
