-- Shared by every script; the K_ locals above it come from keys.list.
-- Per name, all with the hash tag {NAME}:
--   holders (ZSET lease -> expiry ms)   queue (ZSET lease -> ticket)
--   waiters (ZSET lease -> expiry ms)   info (HASH lease -> description)
--   grant (HASH lease -> "TOKEN SINCE_MS")   token (fencing counter)
--   ticket (queue counter)   limits (ZSET lease -> slots it asked for)
--   owner (HASH lease -> "HOST UID")
--   proof (HASH lease -> a secret of the waiter's agent, until its grant)
--   clock ("NOW_MS TTL_MS OFFSET_MS": the server's clock when a script
--   last saw the name, the lease of the agent that called it, and the
--   fleet clock's offset its expiries are on)
-- and one key for all names, K_FLEET_CLOCK (the last KEY; see observe()).
-- Every time comes from the server's clock: no client clock is trusted.
-- Only functions here: the epoch script has other KEYS and uses none of them.

-- The server's clock in ms and in µs, read once a call (a batch of calls
-- happens at one time).
local now_ms_, now_us_
local function now()
  if not now_ms_ then
    local t = redis.call('TIME')
    local sec, usec = tonumber(t[1]), tonumber(t[2])
    now_ms_, now_us_ = sec * 1000 + math.floor(usec / 1000), sec * 1000000 + usec
  end
  return now_ms_, now_us_
end

-- The keys this call wrote, and whether they need their idle time again
-- (see idle()): `fresh` when the call made a key (the name was empty, a
-- counter is new), `due` when it rewrote the clock key, which it does at
-- most every twentieth of a lease and then gives every key its idle time
-- again. So a key that exists has nearly all of idle_ms left, and a call
-- that only changes keys that exist writes no expiry at all.
local written, fresh, due = {}, false, false
local function write(cmd, key, ...)
  written[key] = true
  return redis.call(cmd, key, ...)
end

-- How wake-ups are published: in a Redis Cluster the agent makes this
-- 'SPUBLISH' (sharded pub/sub: only the node of the name's hash slot).
local WAKE_COMMAND = 'PUBLISH'

-- Numbers past 1e14 (tokens) as digits: Lua's `..` would print 1.8e+15.
local function digits(x)
  return string.format('%.0f', x)
end

-- "P:{NAME}:holders" -> "P:{NAME}:wake". The message is "1" (look again),
-- or "g LEASE TOKEN SINCE PROOF ..." naming the waiters just granted, each
-- with the secret its agent gave when it queued ("-": none). Only a
-- script can know that secret: a message that carries it is Redis' word;
-- one that does not is a hint.
local function wake(message)
  redis.call(WAKE_COMMAND, string.sub(K_HOLDERS, 1, -#'holders' - 1) .. 'wake', message or '1')
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

-- The fleet's clock key, K_FLEET_CLOCK (the last KEY, one for all names):
-- "LAST_MS OFFSET_MS ERA TOKEN_OFFSET_MS RUN_ID". observe() reads it and
-- says what the first three are; next_token() the others. fleet_write()
-- writes back what `fleet` holds; `fleet_due`: at the end of the call.
local fleet, fleet_due = {}, false
local function field(w, pattern, default)
  return tonumber(w and string.match(w, pattern)) or default
end
local function fleet_read()
  local w = {}
  for f in string.gmatch(redis.call('GET', K_FLEET_CLOCK) or '', '%S+') do w[#w + 1] = f end
  fleet.last, fleet.era = field(w[1], '^%d+$', nil), field(w[3], '^%d+$', 0)
  fleet.offset, fleet.token_offset = field(w[2], '^%-?%d+$', 0), field(w[4], '^%-?%d+$', 0)
  fleet.run_id = w[5] and string.match(w[5], '^%x+$') or ''
end
local function fleet_write()
  redis.call('SET', K_FLEET_CLOCK, table.concat({digits(fleet.last), digits(fleet.offset), digits(fleet.era),
    digits(fleet.token_offset), fleet.run_id}, ' '))
  fleet_due = false
end

-- This Redis process (a restart or a failover is another), read once a
-- call; '' when INFO does not say (then no two are the same).
local run_id_
local function run_id()
  if not run_id_ then
    local info = redis.pcall('INFO', 'server')
    run_id_ = type(info) == 'string' and string.match(info, 'run_id:(%x+)') or ''
  end
  return run_id_
end

-- Tokens never go back. The counter goes up by one a grant, and never
-- below the tokens' clock in µs: Redis may come back with an older counter
-- (restored from a snapshot, an old replica promoted) or none, and every
-- token handed out before must stay below every new one. The tokens' clock
-- is the server's less the steps of it that observe() saw within one Redis
-- process (TOKEN_OFFSET_MS, never below 0): tokens handed out while the
-- clock was stepped forward are not ahead of real time, and a counter
-- restored from before them starts again above them once the clock is put
-- right. It is never ahead of the server's clock, and it is the server's
-- clock again in another process (a restart, a failover: observe() asks
-- the run id whenever it writes the key, and the first call after a
-- restart finds the key's time older than a twentieth of a lease unless
-- the restart was quicker and its data that recent), so across any loss
-- of data it is at least what the server's clock alone would give. (INFO
-- costs Redis about as much as a grant: not asked on every one.)
-- Every call that hands out a token makes LAST_MS its own time, so that
-- after a step (or silence, which looks the same) that clock goes on from
-- just past the last token: see observe().
local function token_offset_move(id, by)
  if id == '' or id ~= fleet.run_id then
    fleet.token_offset = 0
  else
    fleet.token_offset = math.max(0, fleet.token_offset + by)
  end
  fleet.run_id = id
end
local function token_clock(now_us)
  local now_ms = now()
  if fleet.last ~= now_ms then
    fleet.last, fleet_due = now_ms, true
  end
  return math.max(1, now_us - fleet.token_offset * 1000)
end

-- A missing counter starts from the tokens' clock.
local function start_token(now_us)
  if redis.call('EXISTS', K_TOKEN) == 0 then
    write('SET', K_TOKEN, digits(token_clock(now_us)))
    fresh = true
  end
end

local function next_token(now_us)
  local token, floor = write('INCR', K_TOKEN), token_clock(now_us)
  if token == 1 then fresh = true end
  if token < floor then
    token = floor
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
  redis.call('HDEL', K_PROOF, lease)
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
-- restored VM, an operator). Every agent with a lease calls Redis at least
-- every third of a lease, so a script that finds the clock more than half
-- a lease ahead of the last call's on any name (the fleet's clock key,
-- K_FLEET_CLOCK: LAST_MS, OFFSET_MS, ERA), or behind it, sees a step, not
-- time passing: it adds the step to the fleet's offset. Each name keeps
-- the offset its expiries are on ("LAST_MS TTL_MS OFFSET_MS"), and the
-- first script on it after a step moves them by what the offset moved:
-- a step never ends a lease early, nor makes one last longer. (A gap in
-- every agent's calls, when no agent could reach Redis, counts as a step:
-- it ends nobody's lease.) ERA names the Redis state the key's writer
-- knew, by that state's grace_until: written before the reset the caller
-- knows of (Redis restored from a snapshot, a failover), what it says is
-- old data, not a step: that reset is handled by re-assertion and grace,
-- and its dead leases run out as they would have. Within one state every step counts, also one during
-- its grace period, and one that takes the clock back to before it.
-- `ttl` is the caller's lease (nil: the last caller's on the name),
-- `grace_until` that of its Redis state (nil: unknown, a looker's); a
-- `looker` (status) writes nothing and, after a step, drops nothing
-- either (returns false). The tokens' clock (see next_token) takes out
-- the steps seen within one Redis process only: across a restart or a
-- failover, time has passed, and old data is no step. Silence in every
-- agent's calls counts (a step and silence look the same), so after a step
-- the tokens' clock goes on from 1 ms past LAST_MS, the time of the last
-- call that handed out a token, if not later. A caller that knows no lease
-- (a release on a name without a clock key) sees no step forward.
local function observe(now_ms, ttl, grace_until, looker)
  local last, last_ttl, offset = string.match(redis.call('GET', K_CLOCK) or '', '^(%d+) (%d+) (%-?%d+)$')
  last, last_ttl, offset = tonumber(last), tonumber(last_ttl), tonumber(offset)
  ttl = tonumber(ttl) or last_ttl or 0
  fleet_read()
  local fleet_last, fleet_offset = fleet.last, fleet.offset
  grace_until = tonumber(grace_until) or 0
  local stale = fleet_last and grace_until > fleet.era
  local stepped = fleet_last and not stale and ((ttl > 0 and now_ms - fleet_last > ttl / 2) or now_ms < fleet_last)
  if stepped then fleet_offset = fleet_offset + now_ms - fleet_last end
  local moved = offset and offset ~= fleet_offset
  if looker then return not (stepped or moved) end
  -- Written again after a twentieth of a lease at most, not every call;
  -- never by a caller that knows no lease (it would swallow a step).
  local id = (stale or stepped or not fleet_last or (ttl > 0 and now_ms - fleet_last >= ttl / 20)) and run_id()
  if id then token_offset_move(id, stepped and now_ms - fleet_last - 1 or 0) end
  if moved then
    shift(K_HOLDERS, fleet_offset - offset)
    shift(K_WAITERS, fleet_offset - offset)
  end
  if id then
    fleet.last, fleet.offset, fleet.era = now_ms, fleet_offset, math.max(fleet.era, grace_until)
    fleet_write()
  end
  if moved or not last or now_ms - last >= ttl / 20 or ttl ~= last_ttl then
    write('SET', K_CLOCK, digits(now_ms) .. ' ' .. digits(ttl) .. ' ' .. digits(fleet_offset), 'KEEPTTL')
    due = true
  end
  return true
end

-- Drops holders and waiters whose lease ran out (their agent stopped
-- renewing), and wakes the waiters if that freed anything. Every script
-- that changes a name starts here, with its caller's lease if it has one.
local expired = false
local function expire(now_ms, ttl, grace_until, looker)
  -- Once a call: nothing added since runs out at the same time.
  if expired then return end
  expired = true
  if not observe(now_ms, ttl, grace_until, looker) then return end
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

-- Makes `lease` a holder until `expiry`, out of the line if `queued`,
-- beside `held` others; it keeps its limits entry. Returns its token.
local function grant(lease, expiry, now_ms, now_us, queued, held)
  if held == 0 then fresh = true end
  if queued then
    redis.call('ZREM', K_QUEUE, lease)
    redis.call('ZREM', K_WAITERS, lease)
    redis.call('HDEL', K_PROOF, lease)
  end
  local token = next_token(now_us)
  write('ZADD', K_HOLDERS, expiry, lease)
  write('HSET', K_GRANT, lease, digits(token) .. ' ' .. digits(now_ms))
  return token
end

-- Hands the free slots to the first in line, in ticket order, while the
-- holders are fewer than the limit in force: the hand-over needs no second
-- call from the waiter's agent. Appends lease, token, since to granted,
-- and its proof to proofs; returns false if the head of the line could not
-- be judged (its agent must look again).
local function grant_next(now_ms, now_us, granted, proofs)
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
    proofs[#proofs + 1] = redis.call('HGET', K_PROOF, head) or '-'
    local token = grant(head, expiry, now_ms, now_us, true, held)
    held = held + 1
    granted[#granted + 1] = head
    granted[#granted + 1] = token
    granted[#granted + 1] = now_ms
    head = redis.call('ZRANGE', K_QUEUE, 0, 0)[1]
  end
  return true
end

-- "g LEASE TOKEN SINCE PROOF ...": the wake message for what grant_next
-- granted.
local function granted_message(granted, proofs)
  local words = {'g'}
  for i = 1, #granted, 3 do
    words[#words + 1] = granted[i]
    words[#words + 1] = digits(granted[i + 1])
    words[#words + 1] = digits(granted[i + 2])
    words[#words + 1] = proofs[(i + 2) / 3]
  end
  return table.concat(words, ' ')
end

-- Every script but status ends here: a name nobody touches for idle_ms
-- leaves Redis. Gives the keys their idle time again: all of them if `all`
-- (renew) or the clock key was rewritten, those this call wrote if it made
-- one; else none (they have it). Returns reply.
local function idle(idle_ms, reply, all)
  if fleet_due then fleet_write() end
  idle_ms = tonumber(idle_ms)
  if idle_ms and idle_ms > 0 and (all or due or fresh) then
    for _, key in ipairs(NAME_KEYS) do
      if all or due or written[key] then
        redis.call('PEXPIRE', key, idle_ms)
      end
    end
  end
  return reply
end

-- ---- The calls a batch can hold (batch.lua); each script of the same name
-- is one of them alone. Each takes its ARGV (A_<SCRIPT>_<NAME> from
-- args.list) and returns its reply; the caller ends with idle().

-- The proof (optional) is kept while the lease waits, for the grant
-- message. Returns {-1} when the lease is another host's or user's;
-- {1, token, since_ms, held, limit} when it holds a slot (now or already);
-- else {0, position, held, limit, ms until the first holder expires or -1}.
local function acquire_call(argv)
  local lease, slots = argv[A_ACQUIRE_LEASE], tonumber(argv[A_ACQUIRE_SLOTS])
  local ttl, desc = tonumber(argv[A_ACQUIRE_TTL_MS]), argv[A_ACQUIRE_DESCRIPTION]
  local me = argv[A_ACQUIRE_HOST] .. ' ' .. argv[A_ACQUIRE_UID]
  local grace_until = tonumber(argv[A_ACQUIRE_GRACE_UNTIL_MS]) or 0
  local proof = argv[A_ACQUIRE_PROOF]
  local now_ms, now_us = now()
  expire(now_ms, ttl, grace_until)

  if foreign(lease, me) then return {-1} end

  if redis.call('ZSCORE', K_HOLDERS, lease) then
    write('ZADD', K_HOLDERS, now_ms + ttl, lease)
    local token, since = grant_of(lease)
    return {1, token, since, redis.call('ZCARD', K_HOLDERS), limit_in_force(slots)}
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
  local line = redis.call('ZCARD', K_QUEUE)
  if line == 0 then
    local limit = math.min(slots, limit_in_force(slots))
    if now_ms >= grace_until and held < limit then
      newcomer()
      local token = grant(lease, now_ms + ttl, now_ms, now_us, false, held)
      return {1, token, now_ms, held + 1, limit}
    end
    fresh = true
  end

  if line == 0 or not redis.call('ZSCORE', K_QUEUE, lease) then
    local ticket = write('INCR', K_TICKET)
    if ticket == 1 then fresh = true end
    write('ZADD', K_QUEUE, ticket, lease)
    newcomer()
  end
  write('ZADD', K_WAITERS, now_ms + ttl, lease)

  local limit = limit_in_force(slots)
  local rank = redis.call('ZRANK', K_QUEUE, lease)
  if now_ms >= grace_until and held < limit and rank < limit - held then
    local token = grant(lease, now_ms + ttl, now_ms, now_us, true, held)
    return {1, token, now_ms, held + 1, limit}
  end
  if proof and proof ~= '' then write('HSET', K_PROOF, lease, proof) end

  local first = redis.call('ZRANGE', K_HOLDERS, 0, 0, 'WITHSCORES')
  local next_expiry = -1
  if first[2] then next_expiry = tonumber(first[2]) - now_ms end
  return {0, rank + 1, held, limit, next_expiry}
end

-- Gives the slot back (or leaves the queue) and hands what that frees to
-- the next in line. Returns {-1} when the lease is another host's or
-- user's, else {held, lease, token, since, ...}: 1 if it held, then each
-- waiter granted.
local function release_call(argv)
  local lease, me = argv[A_RELEASE_LEASE], argv[A_RELEASE_HOST] .. ' ' .. argv[A_RELEASE_UID]
  local grace_until = tonumber(argv[A_RELEASE_GRACE_UNTIL_MS]) or 0
  local now_ms, now_us = now()
  expire(now_ms, nil, grace_until)

  if foreign(lease, me) then return {-1} end

  local held = redis.call('ZREM', K_HOLDERS, lease)
  local queued = 0
  if held == 0 then queued = redis.call('ZREM', K_QUEUE, lease) end
  forget(lease, held == 1)
  local granted, proofs = {}, {}
  -- A place in line also matters: those behind it may now be first. During
  -- the grace period after a reset the slot stays free.
  if held == 1 or queued == 1 then
    local judged = true
    if now_ms >= grace_until then judged = grant_next(now_ms, now_us, granted, proofs) end
    if #granted > 0 then wake(granted_message(granted, proofs)) end
    -- Those behind a lease that left the line have a new place.
    if not judged or queued == 1 then wake() end
  end
  local reply = {held}
  for _, v in ipairs(granted) do reply[#reply + 1] = v end
  return reply
end

-- Extends holders and waiters among leases (one agent's on this name);
-- returns the leases that are neither (expired or evicted) or that belong
-- to another host.
local function renew_call(argv)
  local ttl, host = tonumber(argv[A_RENEW_TTL_MS]), argv[A_RENEW_HOST]
  local now_ms = now()
  expire(now_ms, ttl, argv[A_RENEW_GRACE_UNTIL_MS])
  local missing = {}
  for i = A_RENEW_LEASES, #argv do
    local lease = argv[i]
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
  return missing
end

-- For an agent that restarted: does this lease hold? Returns {1, token,
-- since_ms, description}, {0} when only queued, {-1} when gone or another
-- host's or user's.
local function adopt_call(argv)
  local lease, ttl = argv[A_ADOPT_LEASE], tonumber(argv[A_ADOPT_TTL_MS])
  local me = argv[A_ADOPT_HOST] .. ' ' .. argv[A_ADOPT_UID]
  local now_ms = now()
  expire(now_ms, ttl, argv[A_ADOPT_GRACE_UNTIL_MS])
  if foreign(lease, me) then return {-1} end
  if redis.call('ZSCORE', K_HOLDERS, lease) then
    write('ZADD', K_HOLDERS, now_ms + ttl, lease)
    local token, since = grant_of(lease)
    return {1, token, since, redis.call('HGET', K_INFO, lease) or ''}
  end
  if redis.call('ZSCORE', K_QUEUE, lease) then return {0} end
  return {-1}
end
