-- KEYS: P:epoch:{TAG} in the first hash slot a Cluster master owns after a
-- resharding moved its first one (and its epoch key) away, then the data
-- model marker beside it, P:model:{TAG}. ARGV (scripts.list): the epoch the
-- calling agent read from that master at connect ("ID GRACE_UNTIL_MS
-- [MASTER_ID]"), and its data model marker ("N V"; see epoch.lua).
-- The epoch is written there unless the key holds an epoch of the same
-- master process (the same run id: the first 40 of MASTER_ID's 80 hex
-- digits) whose grace ends as late or later: an agent that read the epoch
-- before another one replaced it (a reset seen by others first) never
-- puts the older one back. One of another process is not this master's:
-- an epoch that came with a hash slot the resharding moved here (an agent
-- on this connection sees the process it is connected to; a restarted
-- one closed it); it is replaced. The marker is written when there is
-- none or an older one: a newer agent's stays. Returns 1 when the epoch
-- was written, 0 when a newer one was kept.
local id, until_ms, master = string.match(ARGV[A_FOLLOW_VALUE], '^(%x+) (%d+) ?(%x*)$')
if not id then return redis.error_reply('FLEETSEM follow: not an epoch') end
local model = ARGV[A_FOLLOW_MODEL]
if KEYS[2] and model then
  local theirs = tonumber(string.match(redis.call('GET', KEYS[2]) or '0 0', '^(%d+) [%d.]+$') or '')
  if theirs and theirs < tonumber(string.match(model, '^(%d+) ')) then redis.call('SET', KEYS[2], model) end
end
local was = redis.call('GET', KEYS[1])
if was then
  local _, was_until, was_master = string.match(was, '^(%x+) (%d+) ?(%x*)$')
  if was_until and string.sub(was_master, 1, 40) == string.sub(master, 1, 40) and
    tonumber(was_until) >= tonumber(until_ms) then
    return R_FOLLOW_KEPT
  end
end
redis.call('SET', KEYS[1], ARGV[A_FOLLOW_VALUE])
return R_FOLLOW_WRITTEN
