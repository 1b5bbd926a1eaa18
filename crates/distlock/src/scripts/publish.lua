-- publish.lua: how the scripts wake waiters. Not a script of its own: scripts/mod.rs joins it
-- in front of every script (but those marked `(no_publish)`, which wake nobody); it reads no
-- KEYS or ARGV and defines one local function.
--
-- publish(channel, message)
--          PUBLISH message on channel (classic pub/sub). The client runs a variant of each
--          script, chosen by its pub/sub mode, in which this body is SPUBLISH (sharded pub/sub:
--          the message stays on the channel's slot, as Redisson 3.22+ does on a Redis 7
--          Cluster) or both commands. Every channel shares its lock key's hash slot.
--          pcall: a user without rights on the channel (NOPERM) still gets the result of what
--          the script did; waiters re-check on their own.
-- Returns  nothing.
local function publish(channel, message)
  redis.pcall('publish', channel, message)
end
