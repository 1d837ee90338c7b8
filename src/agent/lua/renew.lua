-- ARGV: ttl_ms, lease... (one agent's leases on this name). Extends holders
-- and waiters; returns the leases that are neither (expired or evicted).
local ttl = tonumber(ARGV[1])
local now = now_ms()
expire(now)
local missing = {}
for i = 2, #ARGV do
  local lease = ARGV[i]
  if redis.call('ZSCORE', K_HOLDERS, lease) then
    redis.call('ZADD', K_HOLDERS, now + ttl, lease)
  elseif redis.call('ZSCORE', K_WAITERS, lease) then
    redis.call('ZADD', K_WAITERS, now + ttl, lease)
  else
    missing[#missing + 1] = lease
  end
end
return missing
