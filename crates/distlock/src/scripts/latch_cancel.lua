-- latch_cancel.lua: cancel a request whose outcome its caller does not know, through the
-- request's latch (the acquire latch of a re-entry).
--
-- A request that timed out may still be queued on a stalled server. Cancelling leaves a
-- tombstone 'undone:<prior>' in its latch: if the request ran already, the caller learns its
-- result (and gives the grant back); if it runs later, it finds the tombstone and does
-- nothing. Resending this script answers the same.
--
-- KEYS[1]  the request's latch (string, PX)
-- ARGV[1]  tombstone TTL in milliseconds (the resend window)
--
-- Returns  ''        the request had not run; it never will
--          <result>  the request ran with this result (e.g. the hold count it granted);
--                    the caller undoes it

local prior = redis.call('get', KEYS[1])
if prior and string.sub(prior, 1, 7) == 'undone:' then
  return string.sub(prior, 8)
end
redis.call('set', KEYS[1], 'undone:' .. (prior or ''), 'px', ARGV[1])
return prior or ''
