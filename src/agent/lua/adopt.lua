-- ARGV: lease, ttl_ms. For an agent that restarted: does this lease hold?
-- Returns {1, token, since_ms, description}, {0} when only queued, {-1} gone.
local lease, ttl = ARGV[1], tonumber(ARGV[2])
local now = now_ms()
expire(now)
if redis.call('ZSCORE', K_HOLDERS, lease) then
  redis.call('ZADD', K_HOLDERS, now + ttl, lease)
  local token, since = grant_of(lease)
  return {1, token, since, redis.call('HGET', K_INFO, lease) or ''}
end
if redis.call('ZSCORE', K_QUEUE, lease) then return {0} end
return {-1}
