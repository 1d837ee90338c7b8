-- Shared by every script. KEYS of one name, all with the hash tag {NAME}:
--   1 holders (ZSET lease -> expiry ms)   2 queue (ZSET lease -> ticket)
--   3 waiters (ZSET lease -> expiry ms)   4 info (HASH lease -> holder description)
--   5 grant (HASH lease -> "token since_ms")   6 token (fencing counter)   7 ticket (counter)
-- Every time comes from the server's clock: no client clock is trusted.
local K_HOLDERS, K_QUEUE, K_WAITERS, K_INFO = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local K_GRANT, K_TOKEN, K_TICKET = KEYS[5], KEYS[6], KEYS[7]

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- "P:{NAME}:holders" -> "P:{NAME}:wake"
local function wake()
  redis.call('PUBLISH', string.sub(K_HOLDERS, 1, -8) .. 'wake', '1')
end

local function forget(lease)
  redis.call('ZREM', K_QUEUE, lease)
  redis.call('ZREM', K_WAITERS, lease)
  redis.call('HDEL', K_INFO, lease)
  redis.call('HDEL', K_GRANT, lease)
end

-- Drops holders and waiters whose lease ran out (their agent stopped
-- renewing), and wakes the waiters if that freed anything.
local function expire(now)
  local freed = false
  for _, lease in ipairs(redis.call('ZRANGEBYSCORE', K_HOLDERS, '-inf', now)) do
    redis.call('ZREM', K_HOLDERS, lease)
    forget(lease)
    freed = true
  end
  for _, lease in ipairs(redis.call('ZRANGEBYSCORE', K_WAITERS, '-inf', now)) do
    forget(lease)
    freed = true
  end
  if freed then wake() end
end

local function grant_of(lease)
  local g = redis.call('HGET', K_GRANT, lease)
  local token, since = string.match(g or '', '^(%d+) (%d+)$')
  return tonumber(token) or 0, tonumber(since) or 0
end
