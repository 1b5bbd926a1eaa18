-- leased_extend.lua: move a leased permit's expiry to now + lease, if it has not ended.
--
-- KEYS[1]  leases redisson__timeout__set:{<name>}
-- ARGV[1]  permit id
-- ARGV[2]  lease in ms
--
-- Returns  {1, expiry_ms} extended; {-1} not held (unknown id or lease ended).

local t = redis.call('time')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expiry = redis.call('zscore', KEYS[1], ARGV[1])
if expiry == false or tonumber(expiry) <= now_ms then
  return {-1}
end
local new_expiry = now_ms + tonumber(ARGV[2])
redis.call('zadd', KEYS[1], new_expiry, ARGV[1])
return {1, new_expiry}
