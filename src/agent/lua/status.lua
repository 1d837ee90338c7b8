-- Returns {now_ms, {{lease, expires_in_ms, "token since", description}...},
--          {{lease, description}...}} with the queue in ticket order.
local now = now_ms()
expire(now)
local holders, queue = {}, {}
local h = redis.call('ZRANGE', K_HOLDERS, 0, -1, 'WITHSCORES')
for i = 1, #h, 2 do
  local lease = h[i]
  holders[#holders + 1] = {lease, tonumber(h[i + 1]) - now,
    redis.call('HGET', K_GRANT, lease) or '', redis.call('HGET', K_INFO, lease) or ''}
end
for _, lease in ipairs(redis.call('ZRANGE', K_QUEUE, 0, -1)) do
  queue[#queue + 1] = {lease, redis.call('HGET', K_INFO, lease) or ''}
end
return {now, holders, queue}
