-- Returns {now_ms, {{lease, expires_in_ms, "TOKEN SINCE", description, "HOST UID"}...},
--          {{lease, description, "HOST UID"}...}, limit}, the queue in
-- ticket order, limit 0 when nobody holds or waits.
local now_ms = now()
expire(now_ms, nil, nil, true)
local holders, queue = {}, {}
local h = redis.call('ZRANGE', K_HOLDERS, 0, -1, 'WITHSCORES')
for i = 1, #h, 2 do
  local lease = h[i]
  holders[#holders + 1] = {lease, math.max(0, tonumber(h[i + 1]) - now_ms),
    redis.call('HGET', K_GRANT, lease) or '', redis.call('HGET', K_INFO, lease) or '',
    redis.call('HGET', K_OWNER, lease) or ''}
end
for _, lease in ipairs(redis.call('ZRANGE', K_QUEUE, 0, -1)) do
  queue[#queue + 1] = {lease, redis.call('HGET', K_INFO, lease) or '',
    redis.call('HGET', K_OWNER, lease) or ''}
end
return {now_ms, holders, queue, limit_in_force(0)}
