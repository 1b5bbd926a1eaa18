-- records.lua: how latch_count_down.lua reads back the count a request recorded. Not a script
-- of its own: scripts/mod.rs joins it in front of the scripts that use it, at build time, so it
-- reads no KEYS or ARGV and returns nothing; it only defines a local function.
--
-- recorded_left(key, request)
--          The count left that request number `request` (its number within its block of
--          keys::RECORD_BLOCK = 64) recorded in the count-down record set `key`, or nil: the
--          member -(left * 64 + request + 1), or '<request>=<left>' for a count of 2^40 or
--          more. Read only on a resend (SMEMBERS of one block's records).
--
-- Returns  (nothing: helpers only)

local function recorded_left(key, request)
  local f = tonumber(request)
  local prefix = request .. '='
  for _, m in ipairs(redis.call('smembers', key)) do
    if string.sub(m, 1, #prefix) == prefix then
      return tonumber(string.sub(m, #prefix + 1))
    end
    local n = tonumber(m)
    if n and n < 0 then
      n = -n - 1
      if n % 64 == f then
        return (n - f) / 64
      end
    end
  end
end
