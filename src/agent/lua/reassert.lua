-- After Redis came back without this holder (restarted without its data, or
-- a failover lost it): puts it back if a slot is free, also during the grace
-- period. Returns 1 if it holds, 0 if lost, -1 if the lease is another
-- host's or user's.
local lease, slots = ARGV[A_REASSERT_LEASE], tonumber(ARGV[A_REASSERT_SLOTS])
local token, since = tonumber(ARGV[A_REASSERT_TOKEN]), ARGV[A_REASSERT_SINCE_MS]
local ttl, desc = tonumber(ARGV[A_REASSERT_TTL_MS]), ARGV[A_REASSERT_DESCRIPTION]
local me, idle_ms = ARGV[A_REASSERT_HOST] .. ' ' .. ARGV[A_REASSERT_UID], ARGV[A_REASSERT_IDLE_MS]
local now_ms, now_us = now()
-- Only after a reset, of which grace_until tells: what Redis has from
-- before it is old data, not a clock step.
expire(now_ms, ttl, ARGV[A_REASSERT_GRACE_UNTIL_MS])

if foreign(lease, me) then return idle(idle_ms, -1) end
if redis.call('ZSCORE', K_HOLDERS, lease) then
  write('ZADD', K_HOLDERS, now_ms + ttl, lease)
  return idle(idle_ms, 1)
end
if redis.call('ZCARD', K_HOLDERS) >= math.min(slots, limit_in_force(slots)) then
  return idle(idle_ms, 0)
end
forget(lease)
fresh = true
write('ZADD', K_HOLDERS, now_ms + ttl, lease)
write('HSET', K_INFO, lease, desc)
write('HSET', K_GRANT, lease, digits(token) .. ' ' .. since)
write('HSET', K_OWNER, lease, me)
write('ZADD', K_LIMITS, slots, lease)
-- The fencing token never goes back: not below the tokens' clock, if the
-- counter was lost, nor below the token this holder has.
start_token(now_us)
if tonumber(redis.call('GET', K_TOKEN)) < token then
  write('SET', K_TOKEN, digits(token))
end
return idle(idle_ms, 1)
