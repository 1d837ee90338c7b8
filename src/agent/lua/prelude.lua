-- Shared by every script; the K_ locals above it come from keys.list.
-- Per name, all with the hash tag {NAME}:
--   holders (ZSET lease -> expiry ms)   queue (ZSET lease -> ticket)
--   waiters (ZSET lease -> expiry ms)   info (HASH lease -> description)
--   grant (HASH lease -> "TOKEN SINCE_MS")   token (fencing counter)
--   ticket (queue counter)   limits (ZSET lease -> slots it asked for)
--   owner (HASH lease -> "HOST UID")
--   clock ("NOW_MS TTL_MS": the server's clock when a script last saw the
--   name, and the lease of the agent that called it)
-- Every time comes from the server's clock: no client clock is trusted.
-- Only functions here: the epoch script has other KEYS and uses none of them.

-- The server's clock in ms and in µs.
local function now()
  local t = redis.call('TIME')
  local sec, usec = tonumber(t[1]), tonumber(t[2])
  return sec * 1000 + math.floor(usec / 1000), sec * 1000000 + usec
end

-- The keys this call wrote. A key needs its idle time again only when it
-- is written (or created): renew gives it to all of a name's keys, so a
-- name in use never runs out, and every other call to the ones it wrote.
local written = {}
local function write(cmd, key, ...)
  written[key] = true
  return redis.call(cmd, key, ...)
end

-- Numbers past 1e14 (tokens) as digits: Lua's `..` would print 1.8e+15.
local function digits(x)
  return string.format('%.0f', x)
end

-- "P:{NAME}:holders" -> "P:{NAME}:wake". The message is a hint: "1" (look
-- again), or "g LEASE TOKEN SINCE ..." naming the waiters just granted.
local function wake(message)
  redis.call('PUBLISH', string.sub(K_HOLDERS, 1, -#'holders' - 1) .. 'wake', message or '1')
end

-- The limit in force: the lowest number of slots any holder or waiter of
-- the name asked for; `default` when there is none.
local function limit_in_force(default)
  local lowest = redis.call('ZRANGE', K_LIMITS, 0, 0, 'WITHSCORES')
  if lowest[2] then return tonumber(lowest[2]) end
  return default
end

-- true when the lease belongs to another host or user than `me` ("HOST UID").
local function foreign(lease, me)
  local owner = redis.call('HGET', K_OWNER, lease)
  return owner and owner ~= me
end

-- Tokens never go back, even when Redis lost the counter: it starts again
-- from the server's clock in µs, above every token issued before.
local function start_token(now_us)
  if redis.call('EXISTS', K_TOKEN) == 0 then
    write('SET', K_TOKEN, digits(now_us))
  end
end

-- Never below the server's clock either: Redis may come back with an older
-- counter (restored from a snapshot, an old replica promoted), and tokens
-- handed out since must stay below every new one.
local function next_token(now_us)
  local token = write('INCR', K_TOKEN)
  if token < now_us then
    token = now_us
    write('SET', K_TOKEN, digits(token))
  end
  return token
end

-- Everything about `lease` but its holders entry. A `holder` (it was one:
-- a grant takes it out of the line) is in neither the queue nor waiters.
local function forget(lease, holder)
  if not holder then
    redis.call('ZREM', K_QUEUE, lease)
    redis.call('ZREM', K_WAITERS, lease)
  end
  redis.call('HDEL', K_INFO, lease)
  redis.call('HDEL', K_GRANT, lease)
  redis.call('ZREM', K_LIMITS, lease)
  redis.call('HDEL', K_OWNER, lease)
end

-- Adds `by` ms to every expiry in the ZSET `key`.
local function shift(key, by)
  local all = redis.call('ZRANGE', key, 0, -1, 'WITHSCORES')
  for i = 1, #all, 2000 do
    local args = {}
    for j = i, math.min(i + 1999, #all), 2 do
      args[#args + 1] = tonumber(all[j + 1]) + by
      args[#args + 1] = all[j]
    end
    redis.call('ZADD', key, unpack(args))
  end
end

-- Expiries are on the server's wall clock, which can be stepped (NTP, a
-- restored VM, an operator). Renewals reach a name every third of a lease
-- while anyone holds or waits, so a script that finds the clock more than
-- half a lease ahead of the last one (or behind it) sees a step, not time
-- passing: it moves every expiry of the name by as much, so a step never
-- ends a lease early. Time nobody saw does not count: if the name's agents
-- were all gone meanwhile, their leases end a lease after someone looks
-- again. `ttl` is the caller's lease (nil: the last caller's); a `looker`
-- (status) never creates the key.
local function observe(now_ms, ttl, looker)
  local last, last_ttl = string.match(redis.call('GET', K_CLOCK) or '', '^(%d+) (%d+)$')
  last, last_ttl = tonumber(last), tonumber(last_ttl)
  ttl = tonumber(ttl) or last_ttl or 0
  local stepped = last and (now_ms - last > ttl / 2 or now_ms < last)
  if stepped then
    shift(K_HOLDERS, now_ms - last)
    shift(K_WAITERS, now_ms - last)
  end
  -- Written again after a twentieth of a lease at most, not on every call.
  if stepped or (not looker and (not last or now_ms - last >= ttl / 20 or ttl ~= last_ttl)) then
    write('SET', K_CLOCK, digits(now_ms) .. ' ' .. digits(ttl), 'KEEPTTL')
  end
end

-- Drops holders and waiters whose lease ran out (their agent stopped
-- renewing), and wakes the waiters if that freed anything. Every script
-- that changes a name starts here, with its caller's lease if it has one.
local function expire(now_ms, ttl, looker)
  observe(now_ms, ttl, looker)
  local freed = false
  for _, lease in ipairs(redis.call('ZRANGEBYSCORE', K_HOLDERS, '-inf', now_ms)) do
    redis.call('ZREM', K_HOLDERS, lease)
    forget(lease, true)
    freed = true
  end
  for _, lease in ipairs(redis.call('ZRANGEBYSCORE', K_WAITERS, '-inf', now_ms)) do
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

-- Makes `lease` a holder until `expiry`, out of the line if `queued`; it
-- keeps its limits entry. Returns its token.
local function grant(lease, expiry, now_ms, now_us, queued)
  if queued then
    redis.call('ZREM', K_QUEUE, lease)
    redis.call('ZREM', K_WAITERS, lease)
  end
  local token = next_token(now_us)
  write('ZADD', K_HOLDERS, expiry, lease)
  write('HSET', K_GRANT, lease, digits(token) .. ' ' .. digits(now_ms))
  return token
end

-- Hands the free slots to the first in line, in ticket order, while the
-- holders are fewer than the limit in force: the hand-over needs no second
-- call from the waiter's agent. Appends lease, token, since to granted;
-- returns false if the head of the line could not be judged (its agent
-- must look again).
local function grant_next(now_ms, now_us, granted)
  local head = redis.call('ZRANGE', K_QUEUE, 0, 0)[1]
  if not head then return true end
  local held = redis.call('ZCARD', K_HOLDERS)
  -- Nobody leaves on the way: the limit stays what it is.
  local limit = limit_in_force(nil)
  while head do
    -- Its agent renewed it as a waiter until now: no longer, not anew.
    local expiry = redis.call('ZSCORE', K_WAITERS, head)
    if not limit or not expiry then return false end
    if held >= limit then return true end
    local token = grant(head, expiry, now_ms, now_us, true)
    held = held + 1
    granted[#granted + 1] = head
    granted[#granted + 1] = token
    granted[#granted + 1] = now_ms
    head = redis.call('ZRANGE', K_QUEUE, 0, 0)[1]
  end
  return true
end

-- "g LEASE TOKEN SINCE ...": the wake message for what grant_next granted.
local function granted_message(granted)
  local words = {'g'}
  for i, v in ipairs(granted) do
    words[i + 1] = type(v) == 'number' and digits(v) or v
  end
  return table.concat(words, ' ')
end

-- Every script but status ends here: a name nobody touches for idle_ms
-- leaves Redis. The keys this call wrote get idle_ms to live again (all
-- of them with all: renew). Returns reply.
local function idle(idle_ms, reply, all)
  idle_ms = tonumber(idle_ms)
  if idle_ms and idle_ms > 0 then
    for _, key in ipairs(KEYS) do
      if all or written[key] then
        redis.call('PEXPIRE', key, idle_ms)
      end
    end
  end
  return reply
end
