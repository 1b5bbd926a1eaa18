-- rw_write_acquire.lua: take a write hold of a read-write lock (Redisson RedissonWriteLock
-- layout); a refused writer registers as waiting so new readers hold back.
--
-- KEYS[1]  lock key (hash; see rw_read_acquire.lua)
-- KEYS[2]  waiting writers distlock_rwlock_writers:{<name>} (zset owner -> deadline ms)
-- KEYS[3]  fencing counter
-- ARGV[1]  lease in ms
-- ARGV[2]  owner's write field <owner>:write
-- ARGV[3]  owner field (its read holds)
-- ARGV[4]  mode: 'new' | 'nested'
-- ARGV[5]  liveness timeout of a waiting writer, ms
-- ARGV[6]  '1' to register as a waiting writer when refused, '0' for a single attempt
--
-- Returns  {1, write_holds, fencing_token}  granted
--          {0, wait_ms}                      refused (lock PTTL)
--          {-1} / {-2}                       'nested': gone / not held by this owner
--          {-3}                              refused: this owner holds only a read lock
--                                            (read -> write upgrade would deadlock)
-- Errors   WRONGTYPE when KEYS[1] holds another type (before any write).

local t = redis.call('time')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local mode = redis.call('hget', KEYS[1], 'mode')
local writing = redis.call('hexists', KEYS[1], ARGV[2]) == 1
redis.call('zremrangebyscore', KEYS[2], '-inf', now_ms)

local function token()
  local tok = tonumber(redis.call('get', KEYS[3]) or '0') + 1
  local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  if now_us > tok then tok = now_us end
  redis.call('set', KEYS[3], string.format('%.0f', tok))
  return tok
end

if writing then
  if ARGV[4] == 'new' then
    return {1, tonumber(redis.call('hget', KEYS[1], ARGV[2])), token()}
  end
  local count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {1, count, token()}
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 1 then
  return {-3}
end
if ARGV[4] == 'nested' then
  if mode == false then return {-1} end
  return {-2}
end
if mode == false then
  redis.call('hset', KEYS[1], 'mode', 'write', ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  redis.call('zrem', KEYS[2], ARGV[3])
  return {1, 1, token()}
end
if ARGV[6] == '1' then
  redis.call('zadd', KEYS[2], now_ms + tonumber(ARGV[5]), ARGV[3])
  redis.call('pexpire', KEYS[2], ARGV[5])
end
return {0, redis.call('pttl', KEYS[1])}
