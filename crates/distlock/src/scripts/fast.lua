-- fast.lua: the fencing token of the fast-path acquires (*_acquire_fast.lua). Not a script
-- of its own: scripts/mod.rs joins it in front of each fast-path acquire, at build time, so it
-- reads no KEYS or ARGV and returns nothing; it only defines one local function (each function
-- defined costs the server 500-800 instructions per run, so the fast paths define only this
-- one: the releases none).
--
-- fast_token(counter, floor, clock)
--          The next fencing token of the lock's slot, as prelude.lua's next_token issues it in
--          its common case, or nil with nothing changed when it is not that case (the full
--          scripts handle the rest). Returns the token (a string) and the clock's seconds.
--          floor is the acquire's floor argument, nil for '0'; clock the client's estimate of
--          this server's clock in microseconds (a decimal no later than the server's clock,
--          see conn/standalone.rs's ServerClock), nil or '' when it has none:
--          - nil or a decimal (one server, no generation): the clock (TIME read when the client
--            sent no estimate), in microseconds, written to counter by one SET..GET, and that
--            reading is the token
--            when the counter held a decimal integer below it, or did not exist while floor is
--            nil. Otherwise (a counter ahead of the clock or not a decimal, a new counter with a
--            floor) the counter is put back as it was and nil returned.
--            Cost: TIME, SET..GET.
--          - '<generation>:<floor>' (Sentinel, generation above 0): when the counter holds
--            '<generation>:<sequence>' of this very generation with the sequence below the
--            clock, or does not exist, the token is '<generation>:<clock in microseconds>',
--            written to the counter. Cost: GET, TIME, SET.
--          - 'cluster:<floor>' (Redis Cluster): when the counter holds
--            '<generation>:<sequence>@<replid>' with this node's replication ID (INFO
--            replication's master_replid: this node wrote it since it last became master, so
--            next_token would count on in that generation without reading CLUSTER INFO) and
--            the sequence below the clock, the token is '<generation>:<clock in microseconds>',
--            written to the counter with '@<replid>'. A new counter takes this node's config
--            epoch (CLUSTER INFO) as its generation, as next_token does (in epoch 0 only with
--            the floor 0). Cost: INFO replication, GET, TIME, SET; CLUSTER INFO for a new
--            counter.
--
-- Returns  (nothing: helpers only)

local function fast_token(counter, floor, clock)
  if floor and string.find(floor, ':', 1, true) then
    -- A token with a generation: counted on in the counter's own generation only.
    local gen, replid = string.match(floor, '^(%d+):%d+$')
    if not gen then
      if string.sub(floor, 1, 8) ~= 'cluster:' then
        return nil
      end
      local info = redis.pcall('info', 'replication')
      local at = type(info) == 'string' and string.find(info, 'master_replid:', 1, true)
      if not at then
        return nil
      end
      replid = string.sub(info, at + 14, at + 53)
    end
    local last = redis.call('get', counter)
    local g, seq, rest
    if last then
      g, seq, rest = string.match(last, '^(%d+):(%d+)(.*)$')
      if not g or (gen and g ~= gen) or rest ~= (replid and '@' .. replid or '') or
          (#g > 1 and string.byte(g) == 48) then
        return nil
      end
    else
      -- A new counter: the generation's first token is the clock reading, in the client's
      -- generation (Sentinel) or this node's config epoch (Cluster: CLUSTER INFO, once per
      -- slot). Generation 0 counts on from the floor, left to the full script unless 0.
      g = gen
      if not g then
        local info = redis.pcall('cluster', 'info')
        g = type(info) == 'string' and string.match(info, 'cluster_my_epoch:(%d+)')
        if not g or (g == '0' and string.sub(floor, 9) ~= '0') then
          return nil
        end
      end
      seq = '0'
    end
    -- The clock reading is written out in each branch: one shared after the branch measured
    -- about 1,000 instructions more per grant (the extra locals and test on the common path).
    local t = redis.call('time')
    local us = t[2]
    if #us < 6 then
      us = string.rep('0', 6 - #us) .. us
    end
    local now = t[1] .. us
    if tonumber(seq) >= tonumber(now) then
      return nil
    end
    local token = g .. ':' .. now
    redis.call('set', counter, replid and token .. '@' .. replid or token)
    return token, t[1]
  end
  local now, secs
  if clock and clock ~= '' then
    -- The client's estimate: no TIME (7,000 instructions of a grant's 55,000).
    now, secs = clock, string.sub(clock, 1, -7)
  else
    local t = redis.call('time')
    local us = t[2]
    if #us < 6 then
      us = string.rep('0', 6 - #us) .. us
    end
    now, secs = t[1] .. us, t[1]
  end
  local last = redis.call('set', counter, now, 'GET')
  -- Below the reading, compared as decimal strings (the reading has no leading zero): fewer
  -- digits, or as many and lower as a string. (tonumber's parsing of two 16-digit decimals
  -- cost more than the rest of the grant's Lua.) A counter with a leading zero and as many
  -- digits or more is left to the full script.
  if last then
    if string.find(last, '^%d+$') and (#last < #now or (#last == #now and last < now)) then
      return now, secs
    end
    redis.call('set', counter, last)
    return nil
  end
  if floor then
    redis.call('del', counter)
    return nil
  end
  return now, secs
end
