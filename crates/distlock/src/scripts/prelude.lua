-- prelude.lua: helpers shared by the scripts: fencing tokens, server time, a TTL that must not
-- fail half-way. Not a script of its own: scripts/mod.rs joins it in front of each script that
-- uses it, at build time, so it reads no KEYS or ARGV and returns nothing; it only defines
-- local functions (and one local that caches the TIME reply of the current run).
--
-- now_ms() Server time in milliseconds (a Lua number), from TIME. TIME is called at most once
--          per script run: now_ms and next_token share the reply.
--
-- next_token(counter_key, floor[, fenced_key])
--          The next fencing token, as a decimal string: max(last + 1, server TIME in µs),
--          written to counter_key (string), the counter of the lock's hash slot
--          (<prefix>distlock:fencing-counter:{<slot tag>}). When counter_key does not exist
--          yet, last = floor: a decimal string, the legacy server-wide counter the client read
--          at connect ('0' when there was none), so tokens keep rising across the upgrade to
--          per-slot counters. fenced_key, when given, is the lock's Redisson RFencedLock
--          counter (redisson_lock_token:{<key>}, drawn by INCR): when it exists, last also
--          counts its value, and the token is written there too (TTL kept), so Redisson's next
--          INCR stays above it; it is never created, and a user whose ACL cannot read it
--          (NOPERM) is served as if it did not exist. Exact over the whole range:
--          decimal-string arithmetic, never Lua numbers (doubles, exact only below 2^53) and no
--          float formatting.
--          A floor of the form '<generation>:<floor>' with a generation above 0 (Sentinel:
--          the config epoch of the master the client resolved, which rises with every
--          failover) makes the token '<generation>:<sequence>', ordered by generation first:
--          the counter keeps the highest '<generation>:<sequence>' issued; a newer generation
--          starts its sequence at the clock reading, the same or an older one (a client with a
--          stale view) counts on in the counter's generation. fenced_key is not used then
--          (Redisson's tokens have no generation). A floor 'cluster:<floor>' (Redis Cluster)
--          takes the generation from this node's config epoch (cluster_my_epoch of CLUSTER
--          INFO: a promoted replica's is above every epoch before it). The counter then holds
--          '<generation>:<sequence>@<master_replid>', the replication ID (INFO replication) of
--          the node that wrote it: a node that finds its own ID there counts on in the
--          counter's generation, and reads CLUSTER INFO only after a promotion or a slot
--          migration (or on every grant when its user lacks +info). Generation 0 (a node
--          whose epoch was never bumped) is kept the same way, as '0:<sequence>' (the value of
--          '<sequence>'). Cost on a Cluster: INFO and GET, plus CLUSTER INFO then.
-- Errors   'ERR distlock: fencing counter <key> ...' when the counter (or, for a new counter,
--          the floor; or fenced_key) is not a decimal integer, or is at or above TOKEN_MAX =
--          2^63 - 1 (the largest token: it fits i64 and u64, and a Redisson-style INCR of the
--          counter stays valid). Raised before the script writes anything else, with the
--          counter put back as it was (deleted again when it was new).
--          Cost: TIME (unless now_ms already called it), SET..GET, GET fenced_key when given;
--          one more SET when fenced_key exists, or when a counter ran ahead of the clock, or to
--          put back a value it refuses.
--
-- held_token(key, token_field, counter_key, floor[, fenced_key])
--          The fencing token stored in token_field of the lock hash key, which must be held
--          now; a hold that has none (made by Redisson, which stores no token) is given one by
--          next_token, stored in the hash, so its re-entries report the same token — never 0.
--
-- expire_or_undo(key, ms, ...)
--          PEXPIRE key ms. If the server refuses (e.g. an ACL without PEXPIRE), delete the keys
--          listed in ... (what this script created: a lock without a TTL would outlive its
--          holder forever) and return the error reply for the script to return; nil on
--          success. Scripts extending a key they did not create call it before any write and
--          list nothing.
--
-- holder_value(meta)
--          The value of a lock hash's holder field (distlock:holder) for a grant to a new
--          holder: '<meta>;<server time in whole seconds since the Unix epoch>', where meta is
--          the client's '<app>;<host>;<pid>'. The time is TIME's (the same reading as now_ms
--          and next_token in this run). The value stays within 64 bytes (the client caps app
--          and host), so the hash keeps Redis's compact listpack encoding.
--
-- error_reply(msg)
--          redis.error_reply(msg), with an ACL refusal worded as Redis before 7.2 words it
--          inside a script ("ERR The user executing the script can't ...", and Valkey 8's
--          "ERR ACL failure in script: ...") turned into the NOPERM error Redis 7.2+ answers,
--          so clients classify them alike.

-- The TIME reply of this run, once now_ms or next_token asked for it.
local time_reply

local function now_ms()
  local t = time_reply or redis.call('time')
  time_reply = t
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The largest token sequence (2^63 - 1): it fits i64 and u64, and a Redisson-style INCR of a
-- counter stays valid.
local TOKEN_MAX = '9223372036854775807'

-- The slow paths of the token functions, made on demand (defining a Lua function costs server
-- time on every run that reaches its definition, so the common path defines none of these):
-- exact decimal-string arithmetic (Lua numbers are doubles, exact only below 2^53) and the
-- tokens of a generation above 0. Returns dec_norm, dec_lt, dec_incr, generation_token.
local function token_helpers()
  -- Raise msg as the script's error reply. Redis 6.2 (no redis.REDIS_VERSION) takes only a
  -- string from error(): its error handler cannot show a table, and answers a Lua error
  -- about it instead; its reply then reads 'ERR Error running script ...: <msg>'.
  local function raise(msg)
    if redis.REDIS_VERSION == nil then
      error(msg)
    end
    error(redis.error_reply(msg))
  end

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

  -- next_token of a generation above 0: '<generation>:<sequence>', see the header. replid
  -- (Redis Cluster, when known) is written after the token as '@<replid>'; last is the
  -- counter's value when the caller read it already (false: absent), nil to read it here.
  local function generation_token(counter_key, floor, generation, replid, last)
    local t = time_reply or redis.call('time')
    time_reply = t
    local now = t[1] .. string.rep('0', 6 - #t[2]) .. t[2]
    if last == nil then
      last = redis.call('get', counter_key)
    end
    local last_gen, last_seq = '0', floor
    if last then
      local g, q = string.match(last, '^(%d+):(%d+)$')
      if not g then
        g, q = string.match(last, '^(%d+):(%d+)@%x+$')
      end
      if g then
        last_gen, last_seq = g, q
      else
        last_seq = last
      end
    end
    local seq = dec_norm(last_seq)
    if seq == nil or not dec_lt(seq, TOKEN_MAX) then
      raise('ERR distlock: fencing counter ' .. counter_key .. ' holds "' ..
        string.sub(last or floor, 1, 40) .. '", not a token below 2^63; no token can be issued ' ..
        '(fix or delete the key)')
    end
    local gen, counted = dec_norm(generation), dec_norm(last_gen)
    if dec_lt(counted, gen) then
      -- A newer generation (a promoted master) starts its sequence at the clock.
      seq = now
    else
      -- The counter's generation (a client with an older view counts on in it).
      gen = counted
      if dec_lt(seq, now) then
        seq = now
      else
        seq = dec_incr(seq)
      end
    end
    local token = gen .. ':' .. seq
    if replid then
      redis.call('set', counter_key, token .. '@' .. replid)
    else
      redis.call('set', counter_key, token)
    end
    return token
  end

  return dec_norm, dec_lt, dec_incr, generation_token, raise
end

local function next_token(counter_key, floor, fenced_key)
  -- Redis Cluster: 'cluster:<floor>', the generation is this node's config epoch.
  local cluster_floor = string.match(floor or '', '^cluster:(%d+)$')
  local generation, gen_floor, replid, cluster_last
  if cluster_floor then
    -- CLUSTER INFO counts the states of all 16,384 slots on every call, so the counter keeps
    -- the replication ID of the node that wrote it ('<generation>:<sequence>@<master_replid>')
    -- and a node that finds its own ID there counts on in the counter's generation without
    -- asking. A replica promoted to master always takes a new replication ID, and a slot that
    -- migrates brings a counter written under another node's ID, so a matching ID means this
    -- node wrote the counter since it last became master, with a generation at or above its
    -- config epoch of then, which was above every earlier master's of the slot. A user
    -- without +info (pcall) reads CLUSTER INFO on every grant.
    local info = redis.pcall('info', 'replication')
    replid = type(info) == 'string' and string.match(info, 'master_replid:(%x+)') or nil
    local epoch
    if replid then
      cluster_last = redis.call('get', counter_key) or false
      epoch = cluster_last and string.match(cluster_last, '^(%d+):%d+@' .. replid .. '$')
    end
    generation = epoch or
      string.match(redis.call('cluster', 'info'), 'cluster_my_epoch:(%d+)') or '0'
    gen_floor = cluster_floor
  else
    -- A generation above 0 comes as '<generation>:<floor>' (Sentinel: the master's epoch).
    generation, gen_floor = string.match(floor or '', '^(%d+):(%d+)$')
  end
  if generation and (replid or not string.find(generation, '^0+$')) then
    -- Generation 0 on a Cluster node that can read its replication ID too ('0:<sequence>',
    -- the value of '<sequence>'): the counter keeps the ID, so the next grant need not read
    -- CLUSTER INFO.
    local _, _, _, generation_token = token_helpers()
    return generation_token(counter_key, gen_floor, generation, replid, cluster_last)
  end
  if generation then
    floor = gen_floor
  end
  local t = time_reply or redis.call('time')
  time_reply = t
  local now = t[1] .. string.rep('0', 6 - #t[2]) .. t[2]
  -- One command writes the clock reading and reads the last token.
  local last = redis.call('set', counter_key, now, 'GET')
  local fresh = not last
  if fresh then
    -- The slot's first grant: count on from the floor.
    last = floor or '0'
  end
  -- Redisson's RFencedLock counter of this lock, when a Java service has one. pcall: a user
  -- whose ACL does not cover that key (no RFencedLock shares the lock then) reads nothing.
  local theirs = fenced_key and redis.pcall('get', fenced_key)
  if type(theirs) == 'table' then
    theirs = false
  end
  -- The common case, last < now (and theirs < now), decided cheaply and still exactly, as
  -- decimal strings (now has no leading zero): fewer digits, or as many and lower as a string
  -- (digits collate in byte order). tonumber's parsing (strtod) of two 16-digit decimals cost
  -- more than the rest of this path. Anything else (a leading zero with as many digits or
  -- more) is left to the exact slow path.
  local n = #now
  if string.find(last, '^%d+$') and (#last < n or (#last == n and last < now)) and
      (not theirs or (string.find(theirs, '^%d+$') and
        (#theirs < n or (#theirs == n and theirs < now)))) then
    if theirs then
      redis.call('set', fenced_key, now, 'KEEPTTL')
    end
    return now
  end

  -- The slow path: the counter (or, for a new counter, the floor, or Redisson's counter) was
  -- not below the clock reading (it ran ahead of this server's clock: a restart, a failover,
  -- many grants per microsecond), or is not a decimal integer. Its helpers are defined here,
  -- after the common path returned, so that path does not pay for creating them on every run.
  -- A counter a client of a newer generation wrote ('<generation>:<sequence>'): count on in
  -- its generation (this client's view, generation 0, is older).
  if not fresh and (string.find(last, '^%d+:%d+$') or string.find(last, '^%d+:%d+@%x+$')) then
    redis.call('set', counter_key, last)
    local _, _, _, generation_token = token_helpers()
    return generation_token(counter_key, floor or '0', '0')
  end
  local dec_norm, dec_lt, dec_incr, _, raise = token_helpers()

  -- Put the counter back as it was found, and raise an error naming the bad key.
  local function refuse(key, value, is_counter, why)
    if fresh then
      redis.call('del', counter_key)
    else
      redis.call('set', counter_key, last)
    end
    local shown = value
    if #shown > 40 then
      shown = string.sub(shown, 1, 40) .. '...'
    end
    local what = 'ERR distlock: fencing counter ' .. key
    if is_counter and fresh then
      what = what .. ' is new and starts above its floor (the legacy counter), which'
    end
    if why == 'nan' then
      raise(what .. ' holds "' .. shown .. '", not a decimal integer; no token can be issued ' ..
        '(fix or delete the key)')
    end
    raise(what .. ' is at ' .. shown .. '; tokens end at ' .. TOKEN_MAX ..
      ' (2^63 - 1), so no further token can be issued')
  end

  local n = dec_norm(last)
  if n == nil then
    refuse(counter_key, last, true, 'nan')
  elseif not dec_lt(n, TOKEN_MAX) then
    refuse(counter_key, last, true, 'max')
  end
  -- The highest token issued so far, ours or Redisson's.
  if theirs then
    local m = dec_norm(theirs)
    if m == nil then
      refuse(fenced_key, theirs, false, 'nan')
    elseif not dec_lt(m, TOKEN_MAX) then
      refuse(fenced_key, theirs, false, 'max')
    end
    if dec_lt(n, m) then
      n = m
    end
  end
  local token = now
  if not dec_lt(n, now) then
    -- Count on from the highest.
    token = dec_incr(n)
    redis.call('set', counter_key, token)
  end
  if theirs then
    redis.call('set', fenced_key, token, 'KEEPTTL')
  end
  return token
end

-- The fencing token of the holder of the lock hash key (held now): its token_field. A hold
-- made by a client that stores no token (Redisson) gets one now, stored for its re-entries.
local function held_token(key, token_field, counter_key, floor, fenced_key)
  local token = redis.call('hget', key, token_field)
  if token then
    return token
  end
  token = next_token(counter_key, floor, fenced_key)
  redis.call('hset', key, token_field, token)
  return token
end

local function holder_value(meta)
  local t = time_reply or redis.call('time')
  time_reply = t
  return meta .. ';' .. t[1]
end

local function error_reply(msg)
  if string.find(msg, "^ERR The user executing the script can't") or
      string.find(msg, '^ERR ACL failure in script') then
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

