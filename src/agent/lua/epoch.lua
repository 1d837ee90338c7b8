-- KEYS: P:epoch. ARGV: new_id (32 hex), grace_ms. The reset detector: the
-- key is gone when Redis lost its data (restarted empty, or a failover lost
-- the last writes). Returns {0, value, now_ms} when it exists; else sets it
-- to "NEW_ID GRACE_UNTIL_MS" (no expiry) and returns {1, value, now_ms}.
local now_ms = now()
local value = redis.call('GET', KEYS[1])
if value then return {0, value, now_ms} end
value = ARGV[1] .. ' ' .. digits(now_ms + tonumber(ARGV[2]))
redis.call('SET', KEYS[1], value)
return {1, value, now_ms}
