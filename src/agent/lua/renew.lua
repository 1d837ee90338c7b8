-- ARGV: ttl_ms, host, idle_ms, lease... (one agent's leases on this name).
-- Extends holders and waiters; returns the leases that are neither
-- (expired or evicted) or that belong to another host.
local ttl, host, idle_ms = tonumber(ARGV[1]), ARGV[2], ARGV[3]
local now_ms = now()
expire(now_ms, ttl)
local missing = {}
for i = 4, #ARGV do
  local lease = ARGV[i]
  local owner = redis.call('HGET', K_OWNER, lease)
  if owner and string.sub(owner, 1, #host + 1) ~= host .. ' ' then
    missing[#missing + 1] = lease
  elseif redis.call('ZSCORE', K_HOLDERS, lease) then
    write('ZADD', K_HOLDERS, now_ms + ttl, lease)
  elseif redis.call('ZSCORE', K_WAITERS, lease) then
    write('ZADD', K_WAITERS, now_ms + ttl, lease)
  else
    missing[#missing + 1] = lease
  end
end
return idle(idle_ms, missing, true)
