-- ARGV: lease, slots, token, since_ms, ttl_ms, description
-- After Redis came back without this holder (restarted without its data):
-- puts it back if a slot is free. Returns 1 if it holds, 0 if lost.
local lease, slots, token = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local since, ttl, desc = ARGV[4], tonumber(ARGV[5]), ARGV[6]
local now = now_ms()
expire(now)
if redis.call('ZSCORE', K_HOLDERS, lease) then
  redis.call('ZADD', K_HOLDERS, now + ttl, lease)
  return 1
end
if redis.call('ZCARD', K_HOLDERS) >= slots then return 0 end
forget(lease)
redis.call('ZADD', K_HOLDERS, now + ttl, lease)
redis.call('HSET', K_INFO, lease, desc)
redis.call('HSET', K_GRANT, lease, token .. ' ' .. since)
-- The fencing token never goes backwards.
if (tonumber(redis.call('GET', K_TOKEN)) or 0) < token then
  redis.call('SET', K_TOKEN, token)
end
return 1
