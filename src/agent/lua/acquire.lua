-- ARGV: lease, slots, ttl_ms, description, host, uid, grace_until_ms, idle_ms
-- Returns {-1} when the lease is another host's or user's;
-- {1, token, since_ms, held, limit} when it holds a slot (now or already);
-- else {0, position, held, limit, ms until the first holder expires or -1}.
local lease, slots, ttl, desc = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local me, grace_until, idle_ms = ARGV[5] .. ' ' .. ARGV[6], tonumber(ARGV[7]) or 0, ARGV[8]
local now_ms, now_us = now()
expire(now_ms, ttl)

if foreign(lease, me) then return idle(idle_ms, {-1}) end

if redis.call('ZSCORE', K_HOLDERS, lease) then
  write('ZADD', K_HOLDERS, now_ms + ttl, lease)
  local token, since = grant_of(lease)
  return idle(idle_ms, {1, token, since, redis.call('ZCARD', K_HOLDERS), limit_in_force(slots)})
end

-- First come, first served: granted while among the first (limit - held)
-- in line, so a newcomer never overtakes anyone queued before it. During
-- the grace period after a reset nobody is granted anything.
local held = redis.call('ZCARD', K_HOLDERS)
local function newcomer()
  write('HSET', K_INFO, lease, desc)
  write('HSET', K_OWNER, lease, me)
  write('ZADD', K_LIMITS, slots, lease)
end

-- Nobody in line and a slot free: straight in, without a ticket.
if redis.call('ZCARD', K_QUEUE) == 0 then
  local limit = math.min(slots, limit_in_force(slots))
  if now_ms >= grace_until and held < limit then
    newcomer()
    local token = grant(lease, now_ms + ttl, now_ms, now_us)
    return idle(idle_ms, {1, token, now_ms, held + 1, limit})
  end
end

if not redis.call('ZSCORE', K_QUEUE, lease) then
  write('ZADD', K_QUEUE, write('INCR', K_TICKET), lease)
  newcomer()
end
write('ZADD', K_WAITERS, now_ms + ttl, lease)

local limit = limit_in_force(slots)
local rank = redis.call('ZRANK', K_QUEUE, lease)
if now_ms >= grace_until and held < limit and rank < limit - held then
  local token = grant(lease, now_ms + ttl, now_ms, now_us, true)
  return idle(idle_ms, {1, token, now_ms, held + 1, limit})
end

local first = redis.call('ZRANGE', K_HOLDERS, 0, 0, 'WITHSCORES')
local next_expiry = -1
if first[2] then next_expiry = tonumber(first[2]) - now_ms end
return idle(idle_ms, {0, rank + 1, held, limit, next_expiry})
