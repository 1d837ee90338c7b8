-- KEYS: P:epoch (in a Cluster P:epoch:{TAG}, one per master, in the first
-- hash slot it owns). ARGV (scripts.list): the new id (32 hex), grace_ms, the
-- master's id (its run id and replication id, from INFO: another process,
-- or the same one promoted again, has another; empty when one Redis
-- serves alone), and the grace when the epoch names another master
-- (failover_grace_ms), then the epoch the calling agent last knew: its id
-- and grace_until (known_id, known_grace_until_ms; empty for none). The
-- reset detector: the key is gone when Redis lost its data (restarted
-- empty), and under Sentinel and in a Cluster it names the master it was
-- made on, so that a failover (which may have lost the last writes) starts
-- a new one; a master that was a replica and is promoted again has a new
-- replication id, so that a failover back to a master that never caught up
-- (the same process, its old data and epoch) is one too. An epoch other
-- than the one the agent knew, and older than it (its grace ends earlier,
-- or as early: two epochs `fleetsem redis-init` wrote both say 0),
-- means as well that Redis' data went back to before a state that agent
-- saw (data restored from a copy, say): a loss, which starts a new epoch
-- with the longer grace. Either way its holders re-assert, and the time
-- since the old data was written is no clock step.
-- A master that made a new replication id with no history (replid_fresh
-- '1': it created its backlog for its first replica since it started, or
-- dropped it after repl-backlog-ttl) is the same process with the same
-- data, no failover: the epoch is kept, naming it as it is now.
-- KEYS[2] (when given, with ARGV model): the data model marker beside the
-- epoch, P:model (P:model:{TAG}), "N V": Redis holds fleetsem's data model
-- N, which fleetsem V and later speak (docs/protocol.md). One newer than
-- the caller's, or one it cannot read, touches nothing and returns
-- {4, marker, now_ms}: that agent grants nothing there. An older one, or
-- none, becomes the caller's.
-- Returns {0, value, now_ms} when it holds; else sets it to
-- "NEW_ID GRACE_UNTIL_MS [MASTER_ID]" (no expiry) and returns {1, value, now_ms}
-- when there was none, {2, value, now_ms} when it named another master,
-- {3, value, now_ms} when it was older than the one the agent knew.
-- (The server's clock read here, not with now(): this script does not
-- start with begin_call(), so now()'s would be the last call's.)
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local model = ARGV[A_EPOCH_MODEL]
if KEYS[2] and model then
  local marker = redis.call('GET', KEYS[2])
  local theirs = tonumber(string.match(marker or '0 0', '^(%d+) [%d.]+$') or '')
  local mine = tonumber(string.match(model, '^(%d+) '))
  if not theirs or theirs > mine then return {R_EPOCH_MODEL_NEWER, marker, now_ms} end
  if theirs < mine then redis.call('SET', KEYS[2], model) end
end
local value = redis.call('GET', KEYS[1])
local master_id = ARGV[A_EPOCH_MASTER_ID] or ''
local known_id, known_until = ARGV[A_EPOCH_KNOWN_ID] or '', tonumber(ARGV[A_EPOCH_KNOWN_GRACE_UNTIL_MS] or '')
local went_back = false
if value and ARGV[A_EPOCH_REPLID_FRESH] == '1' and #master_id == 80 then
  local id, grace_until, was = string.match(value, '^(%x+) (%d+) (%x+)$')
  if was and #was == 80 and was ~= master_id and string.sub(was, 1, 40) == string.sub(master_id, 1, 40) then
    value = id .. ' ' .. grace_until .. ' ' .. master_id
    redis.call('SET', KEYS[1], value)
  end
end
if value and (master_id == '' or string.match(value, '^%x+ %d+ (%x+)$') == master_id) then
  local id, grace_until = string.match(value, '^(%x+) (%d+)')
  went_back = known_id ~= '' and known_until ~= nil and id ~= nil and id ~= known_id and
    tonumber(grace_until) <= known_until
  if not went_back then return {R_EPOCH_KEPT, value, now_ms} end
end
-- Another master id (a failover, the same master restarted from a file
-- that may miss the last writes, or promoted again), or older data: the
-- longer of the two graces.
local grace, value_was = tonumber(ARGV[A_EPOCH_GRACE_MS]), value
local failover_grace = ARGV[A_EPOCH_FAILOVER_GRACE_MS]
if value and failover_grace then grace = math.max(grace, tonumber(failover_grace)) end
value = ARGV[A_EPOCH_ID] .. ' ' .. digits(now_ms + tonumber(grace))
if master_id ~= '' then value = value .. ' ' .. master_id end
redis.call('SET', KEYS[1], value)
return {went_back and R_EPOCH_WENT_BACK or value_was and R_EPOCH_FAILOVER or R_EPOCH_MADE, value, now_ms}
