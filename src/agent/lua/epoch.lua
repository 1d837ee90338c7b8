-- KEYS: P:epoch (in a Cluster P:epoch:{TAG}, one per master, in the first
-- hash slot it owns). ARGV (args.list): the new id (32 hex), grace_ms, the
-- master's run id, and the grace when the epoch names another master
-- (failover_grace_ms). The reset detector: the
-- key is gone when Redis lost its data (restarted empty), and under
-- Sentinel and in a Cluster it names the master it was made on, so that a
-- failover (which may have lost the last writes) starts a new one.
-- Returns {0, value, now_ms} when it holds; else sets it to
-- "NEW_ID GRACE_UNTIL_MS [RUN_ID]" (no expiry) and returns {1, value, now_ms}
-- when there was none, {2, value, now_ms} when it named another master.
local now_ms = now()
local value = redis.call('GET', KEYS[1])
local run_id = ARGV[A_EPOCH_RUN_ID] or ''
if value and (run_id == '' or string.match(value, '^%x+ %d+ (%x+)$') == run_id) then
  return {0, value, now_ms}
end
-- Another run id: a failover, or the same master restarted (from a file
-- that may miss the last writes): the longer of the two graces.
local grace, value_was = tonumber(ARGV[A_EPOCH_GRACE_MS]), value
local failover_grace = ARGV[A_EPOCH_FAILOVER_GRACE_MS]
if value and failover_grace then grace = math.max(grace, tonumber(failover_grace)) end
value = ARGV[A_EPOCH_ID] .. ' ' .. digits(now_ms + tonumber(grace))
if run_id ~= '' then value = value .. ' ' .. run_id end
redis.call('SET', KEYS[1], value)
return {value_was and 2 or 1, value, now_ms}
