-- Shared by every script. KEYS of one name, all with the hash tag {NAME}:
--   1 holders (ZSET lease -> expiry ms)   2 queue (ZSET lease -> ticket)
--   3 waiters (ZSET lease -> expiry ms)   4 info (HASH lease -> holder description)
--   5 grant (HASH lease -> "token since_ms")   6 token (fencing counter)   7 ticket (counter)
--   8 slots (HASH lease -> the limit a waiter asked for)
-- Every time comes from the server's clock: no client clock is trusted.
local K_HOLDERS, K_QUEUE, K_WAITERS, K_INFO = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local K_GRANT, K_TOKEN, K_TICKET, K_SLOTS = KEYS[5], KEYS[6], KEYS[7], KEYS[8]

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- "P:{NAME}:holders" -> "P:{NAME}:wake". The message is "1" (look again),
-- or "g LEASE TOKEN SINCE ..." naming the waiters just granted a slot.
local function wake(message)
  redis.call('PUBLISH', string.sub(K_HOLDERS, 1, -8) .. 'wake', message or '1')
end

local function forget(lease)
  redis.call('ZREM', K_QUEUE, lease)
  redis.call('ZREM', K_WAITERS, lease)
  redis.call('HDEL', K_INFO, lease)
  redis.call('HDEL', K_GRANT, lease)
  redis.call('HDEL', K_SLOTS, lease)
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

-- Hands the slots that are free to the first in line, in ticket order, as
-- long as each fits its own limit: the hand-over needs no second call from
-- the waiter's agent. Appends lease, token, since to granted; returns false
-- if the head of the line could not be judged (its agent must look again).
local function grant_next(now, granted)
  local held = redis.call('ZCARD', K_HOLDERS)
  while true do
    local head = redis.call('ZRANGE', K_QUEUE, 0, 0)[1]
    if not head then return true end
    local slots = tonumber(redis.call('HGET', K_SLOTS, head))
    local expiry = redis.call('ZSCORE', K_WAITERS, head)
    if not slots or not expiry then return false end
    if held >= slots then return true end
    redis.call('ZREM', K_QUEUE, head)
    redis.call('ZREM', K_WAITERS, head)
    redis.call('HDEL', K_SLOTS, head)
    local token = redis.call('INCR', K_TOKEN)
    -- Its agent renewed it as a waiter until now: no longer, not anew.
    redis.call('ZADD', K_HOLDERS, expiry, head)
    redis.call('HSET', K_GRANT, head, token .. ' ' .. now)
    held = held + 1
    granted[#granted + 1] = head
    granted[#granted + 1] = token
    granted[#granted + 1] = now
  end
end
