-- prelude.lua: helpers shared by the scripts that grant with a fencing token. Not a script of
-- its own: scripts/mod.rs joins it in front of each script that uses it, at build time, so it
-- reads no KEYS or ARGV and returns nothing; it only defines local functions.
--
-- next_token(counter_key, t)
--          The next fencing token, as a decimal string: max(last + 1, server TIME in µs),
--          written to counter_key (string). t: a TIME reply the script already has, or nil.
--          Exact over the whole range: decimal-string arithmetic, never Lua numbers (doubles,
--          exact only below 2^53) and no float formatting.
-- Errors   'ERR distlock: fencing counter <key> ...' when the counter is not a decimal
--          integer, or is at or above TOKEN_MAX = 2^63 - 1 (the largest token: it fits i64 and
--          u64, and a Redisson-style INCR of the counter stays valid). Raised before the
--          script writes anything else, with the counter put back as it was.
--          Cost: TIME (unless t is given), SET..GET; a second SET only when the counter ran
--          ahead of the clock (or to put back a value it refuses before raising).
--
-- expire_or_undo(key, ms, ...)
--          PEXPIRE key ms. If the server refuses (e.g. an ACL without PEXPIRE), delete the keys
--          listed in ... (what this script created: a lock without a TTL would outlive its
--          holder forever) and return the error reply for the script to return; nil on
--          success. Scripts extending a key they did not create call it before any write and
--          list nothing.
--
-- error_reply(msg)
--          redis.error_reply(msg), with an ACL refusal worded as Redis before 7.2 words it
--          inside a script ("ERR The user executing the script can't ...") turned into the
--          NOPERM error Redis 7.2+ answers, so clients classify both alike.

-- The slow path of next_token: the counter was not below the clock reading now (it ran ahead
-- of this server's clock: a restart, a failover, many grants per microsecond), or is not a
-- decimal integer. Its helpers are defined inside it, so the common path does not pay for
-- creating them on every run.
local function token_after(counter_key, last, now)
  local TOKEN_MAX = '9223372036854775807'

  -- A decimal integer without leading zeros, or nil when s is not one.
  local function dec_norm(s)
    if not string.find(s, '^%d+$') then
      return nil
    end
    local n = string.gsub(s, '^0+', '')
    if n == '' then
      return '0'
    end
    return n
  end

  -- a < b for decimal integers without leading zeros: by length, then digit by digit. Equal
  -- lengths are compared 15 digits at a time as numbers (exact below 10^15 < 2^53), since
  -- Lua's string '<' follows the server's collation locale, not byte order.
  local function dec_lt(a, b)
    local n = #a
    if n ~= #b then
      return n < #b
    end
    if n <= 15 then
      return tonumber(a) < tonumber(b)
    end
    local ha, hb = string.sub(a, 1, n - 15), string.sub(b, 1, n - 15)
    if ha ~= hb then
      return dec_lt(ha, hb)
    end
    return tonumber(string.sub(a, n - 14)) < tonumber(string.sub(b, n - 14))
  end

  -- s + 1 for a decimal integer without leading zeros: bump the last digit that is not a 9
  -- and zero the 9s after it.
  local function dec_incr(s)
    local i = #s
    while i > 0 and string.byte(s, i) == 57 do
      i = i - 1
    end
    if i == 0 then
      return '1' .. string.rep('0', #s)
    end
    return string.sub(s, 1, i - 1) .. string.char(string.byte(s, i) + 1) ..
      string.rep('0', #s - i)
  end

  local n = dec_norm(last)
  if n == nil or not dec_lt(n, TOKEN_MAX) then
    -- Put the refused value back: the failed grant leaves the counter as it found it.
    redis.call('set', counter_key, last)
    local shown = last
    if #shown > 40 then
      shown = string.sub(shown, 1, 40) .. '...'
    end
    if n == nil then
      error(redis.error_reply('ERR distlock: fencing counter ' .. counter_key .. ' holds "' ..
        shown .. '", not a decimal integer; no token can be issued (fix or delete the key)'))
    end
    error(redis.error_reply('ERR distlock: fencing counter ' .. counter_key .. ' is at ' ..
      shown .. '; tokens end at ' .. TOKEN_MAX .. ' (2^63 - 1), so no further token can be ' ..
      'issued'))
  end
  if dec_lt(n, now) then
    return now
  end
  -- Count on from the counter.
  local token = dec_incr(n)
  redis.call('set', counter_key, token)
  return token
end

local function next_token(counter_key, t)
  t = t or redis.call('time')
  local now = t[1] .. string.rep('0', 6 - #t[2]) .. t[2]
  -- One command writes the clock reading and reads the last token.
  local last = redis.call('set', counter_key, now, 'GET')
  if not last then
    return now
  end
  -- The common case, last < now, decided cheaply and still exactly: converting decimals to
  -- doubles rounds monotonically, so tonumber(last) < tonumber(now) implies last < now.
  if string.find(last, '^%d+$') and tonumber(last) < tonumber(now) then
    return now
  end
  return token_after(counter_key, last, now)
end

local function error_reply(msg)
  if string.find(msg, "^ERR The user executing the script can't") then
    msg = 'NOPERM ' .. string.sub(msg, 5)
  end
  return redis.error_reply(msg)
end

local function expire_or_undo(key, ms, ...)
  local r = redis.pcall('pexpire', key, ms)
  if type(r) == 'table' and r.err then
    if select('#', ...) > 0 then
      redis.call('del', ...)
    end
    return error_reply(r.err)
  end
  return nil
end

