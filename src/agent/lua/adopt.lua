-- ARGV: lease, ttl_ms, host, uid[, idle_ms[, grace_until_ms]]. For an agent that restarted:
-- does this lease hold? Returns {1, token, since_ms, description}, {0} when
-- only queued, {-1} when gone or another host's or user's.
local lease, ttl, me, idle_ms = ARGV[1], tonumber(ARGV[2]), ARGV[3] .. ' ' .. ARGV[4], ARGV[5]
local now_ms = now()
expire(now_ms, ttl, ARGV[6])
if foreign(lease, me) then return idle(idle_ms, {-1}) end
if redis.call('ZSCORE', K_HOLDERS, lease) then
  write('ZADD', K_HOLDERS, now_ms + ttl, lease)
  local token, since = grant_of(lease)
  return idle(idle_ms, {1, token, since, redis.call('HGET', K_INFO, lease) or ''})
end
if redis.call('ZSCORE', K_QUEUE, lease) then return idle(idle_ms, {0}) end
return idle(idle_ms, {-1})
