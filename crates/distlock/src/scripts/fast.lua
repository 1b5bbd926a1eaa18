-- fast.lua: the fencing token of the fast-path acquires (*_acquire_fast.lua). Not a script
-- of its own: scripts/mod.rs joins it in front of each fast-path acquire, at build time, so it
-- reads no KEYS or ARGV and returns nothing; it only defines one local function (each function
-- defined costs the server 500-800 instructions per run, so the fast paths define only this
-- one: the releases none).
--
-- fast_token(counter, floor_given)
--          The next fencing token of the lock's slot, as prelude.lua's next_token issues it in
--          its common case: TIME read, the reading in microseconds written to counter by one
--          SET..GET, and that reading is the token when the counter held a decimal integer
--          below it (or did not exist, while floor_given is nil: a floor of '0'). Returns the
--          token (a decimal string) and TIME's seconds; or nil, with the counter put back as
--          it was, in every other case (a counter ahead of the clock or not a decimal, or a new
--          counter with a floor), which the full scripts handle.
--          Cost: TIME, SET..GET.
--
-- Returns  (nothing: helpers only)

local function fast_token(counter, floor_given)
  local t = redis.call('time')
  local us = t[2]
  if #us < 6 then
    us = string.rep('0', 6 - #us) .. us
  end
  local now = t[1] .. us
  local last = redis.call('set', counter, now, 'GET')
  -- Doubles round monotonically, so tonumber(a) < tonumber(b) implies a < b for decimals.
  if last then
    if string.find(last, '^%d+$') and tonumber(last) < tonumber(now) then
      return now, t[1]
    end
    redis.call('set', counter, last)
    return nil
  end
  if floor_given then
    redis.call('del', counter)
    return nil
  end
  return now, t[1]
end
