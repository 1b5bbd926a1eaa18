-- leased_extend.lua: move a leased permit's expiry to now + lease, if it has not ended.
--
-- KEYS[1]  leases redisson__timeout__set:{<name>}
-- ARGV[1]  permit id
-- ARGV[2]  lease in ms
--
-- Returns  {1, expiry_ms} extended; {-1} not held (unknown id or lease ended).
--
-- Uses now_ms from prelude.lua (joined in front by scripts/mod.rs).

local now = now_ms()
local expiry = redis.call('zscore', KEYS[1], ARGV[1])
if expiry == false or tonumber(expiry) <= now then
  return {-1}
end
local new_expiry = now + tonumber(ARGV[2])
redis.call('zadd', KEYS[1], new_expiry, ARGV[1])
return {1, new_expiry}
