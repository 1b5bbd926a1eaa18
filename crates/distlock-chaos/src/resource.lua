-- The fenced resource: a value that refuses a fencing token lower than the highest it has
-- seen, on reads and writes alike (Kleppmann's fenced storage), and logs every operation in
-- its own serial order.
--
-- KEYS[1]  the value (an integer string; absent = 0)
-- KEYS[2]  the highest token accepted so far (a decimal string)
-- KEYS[3]  the log: a list of JSON objects {op, token, by, accepted, before, after}
-- ARGV[1]  "read" or "write"
-- ARGV[2]  the token, in decimal without leading zeros (tokens are up to 2^128 - 1: compared
--          as strings, by length first, since Lua numbers are doubles)
-- ARGV[3]  who presents it ("<process>/<task>")
-- ARGV[4]  the value to write (write only)
--
-- Returns {accepted (1 or 0), the value before the operation}.
local function less(a, b)
  if #a ~= #b then
    return #a < #b
  end
  return a < b
end

local highest = redis.call('GET', KEYS[2])
local before = tonumber(redis.call('GET', KEYS[1]) or '0')
local accepted = not (highest and less(ARGV[2], highest))
local after = before
if accepted then
  redis.call('SET', KEYS[2], ARGV[2])
  if ARGV[1] == 'write' then
    after = tonumber(ARGV[4])
    redis.call('SET', KEYS[1], ARGV[4])
  end
end
redis.call('RPUSH', KEYS[3], cjson.encode({
  op = ARGV[1], token = ARGV[2], by = ARGV[3], accepted = accepted, before = before, after = after
}))
if accepted then
  return {1, before}
end
return {0, before}
