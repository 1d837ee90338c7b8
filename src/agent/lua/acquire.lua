-- ARGV: lease, slots, ttl_ms, description
-- Returns {1, token, since_ms, held} when the lease holds a slot (now or
-- already), else {0, position, held, ms until the first holder expires or -1}.
local lease, slots, ttl, desc = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local now = now_ms()
expire(now)

if redis.call('ZSCORE', K_HOLDERS, lease) then
  redis.call('ZADD', K_HOLDERS, now + ttl, lease)
  local token, since = grant_of(lease)
  return {1, token, since, redis.call('ZCARD', K_HOLDERS)}
end

if not redis.call('ZSCORE', K_QUEUE, lease) then
  redis.call('ZADD', K_QUEUE, redis.call('INCR', K_TICKET), lease)
  redis.call('HSET', K_INFO, lease, desc)
  redis.call('HSET', K_SLOTS, lease, slots)
end
redis.call('ZADD', K_WAITERS, now + ttl, lease)

-- First come, first served: granted while among the first (slots - held)
-- in line, so a newcomer never overtakes anyone queued before it.
local held = redis.call('ZCARD', K_HOLDERS)
local rank = redis.call('ZRANK', K_QUEUE, lease)
if held < slots and rank < slots - held then
  redis.call('ZREM', K_QUEUE, lease)
  redis.call('ZREM', K_WAITERS, lease)
  redis.call('HDEL', K_SLOTS, lease)
  local token = redis.call('INCR', K_TOKEN)
  redis.call('ZADD', K_HOLDERS, now + ttl, lease)
  redis.call('HSET', K_GRANT, lease, token .. ' ' .. now)
  return {1, token, now, held + 1}
end

local first = redis.call('ZRANGE', K_HOLDERS, 0, 0, 'WITHSCORES')
local next_expiry = -1
if first[2] then next_expiry = tonumber(first[2]) - now end
return {0, rank + 1, held, next_expiry}
