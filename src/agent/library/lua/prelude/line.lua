-- The prelude, after clocks.lua: leases that ran out, the line, grants,
-- and names that leave Redis idle.

-- Drops the holders (key K_HOLDERS) or waiters (K_WAITERS) in `gone`,
-- whose leases ran out; true if there were any.
local function ran_out(key, gone)
  if #gone == 0 then return false end
  fetch(gone)
  if key == K_HOLDERS then
    local units = 0
    for _, lease in ipairs(gone) do
      local r = rec[lease]
      units = units + (r and r.weight or 1)
      -- A slot a host held itself (fleetsem reboot) whose host never came
      -- back to renew it: "x LEASE HOST host", for the agents' journals.
      if r and r.hold then wake('x ' .. lease .. ' ' .. r.host .. ' host') end
    end
    if each_chunk('ZREM', K_HOLDERS, gone) == #gone then st.held = st.held - units else st.held = nil end
  else
    st.line = st.line - each_chunk('ZREM', K_QUEUE, gone)
    each_chunk('ZREM', K_WAITERS, gone)
  end
  for _, lease in ipairs(gone) do forget(lease) end
  -- (Some were gone already: counted again, without them.)
  if not st.held then st.held = count_held() end
  return true
end

-- Drops holders and waiters whose lease ran out (their agent stopped
-- renewing), and wakes the waiters if that freed anything. Every script
-- that needs the time calls it (after fetch()), with its caller's lease if
-- it has one.
-- (`lazy`: only when someone waits, whom it may concern; the caller checks
-- the expiry of the leases it names.)
-- Once a call: nothing added since runs out at the same time. A batch's
-- calls (batch.lua) share the time, not the sweep: a later call sweeps
-- again if this one did not (lazy) or if it knows another lease or grace,
-- as it would alone. `expired`: the time, lease and grace of the last sweep.
local expired, expired_ttl, expired_grace = false, false, false
local function expire(now_ms, ttl, grace_until, looker, lazy)
  state()
  local swept_ttl, swept_grace = tonumber(ttl) or st.ttl or 0, tonumber(grace_until) or 0
  if expired == now_ms and expired_ttl == swept_ttl and expired_grace == swept_grace then return end
  if not observe(now_ms, ttl, grace_until, looker) then return end
  if lazy and st.line == 0 then return end
  expired, expired_ttl, expired_grace = now_ms, swept_ttl, swept_grace
  local freed = false
  if st.held > 0 then freed = ran_out(K_HOLDERS, redis.call('ZRANGEBYSCORE', K_HOLDERS, '-inf', now_ms)) end
  if st.line > 0 then freed = ran_out(K_WAITERS, redis.call('ZRANGEBYSCORE', K_WAITERS, '-inf', now_ms)) or freed end
  if freed then wake() end
end

-- Puts `lease` at the end of the line (a new ticket), waiting until `expiry`.
local function enqueue(lease, expiry)
  st.ticket = st.ticket + 1
  if st.line == 0 then created[K_QUEUE], created[K_WAITERS] = true, true end
  st.line, st_dirty = st.line + redis.call('ZADD', K_QUEUE, st.ticket, lease), true
  redis.call('ZADD', K_WAITERS, expiry, lease)
end

-- Makes `lease` (record r) a holder until `expiry`, out of the line if
-- `queued`; the name's census entry is looked for at the call's end
-- (census_keep()). Returns its token.
local function grant(lease, r, expiry, now_ms, now_us, queued)
  census_look = true
  if queued then
    st.line = st.line - redis.call('ZREM', K_QUEUE, lease)
    redis.call('ZREM', K_WAITERS, lease)
    r.proof = '-'
  end
  r.token, r.since = next_token(now_us), now_ms
  if st.held == 0 then created[K_HOLDERS] = true end
  st.held, st_dirty = st.held + redis.call('ZADD', K_HOLDERS, expiry, lease) * r.weight, true
  put(lease, r)
  return r.token
end

-- Hands the free slots to the first in line, in ticket order, while the
-- head's weight fits under the limit in force: the hand-over needs no
-- second call from the waiter's agent. A head that does not fit stops the
-- line (first come, first served: nobody overtakes a heavy job). Appends
-- lease, token, since to granted, and its proof to proofs; returns false
-- if the head of the line could not be judged (its agent must look again:
-- gone, or heavier than the limit now is, or a slot its host would hold
-- itself: only its own acquire knows how long such a slot must wait after
-- a reset, see acquire_call).
local function grant_next(now_ms, now_us, granted, proofs)
  if st.line == 0 then return true end
  -- Nobody leaves on the way: the limit stays what it is.
  local limit = limit_in_force(nil)
  if not limit then return false end
  if st.held >= limit then return true end
  local heads = redis.call('ZRANGE', K_QUEUE, 0, limit - st.held - 1)
  fetch(heads)
  for _, head in ipairs(heads) do
    -- Its agent renewed it as a waiter until now: no longer, not anew.
    local expiry, r = redis.call('ZSCORE', K_WAITERS, head), rec[head]
    if not expiry or not r or r.weight > limit or r.hold then return false end
    if st.held + r.weight > limit then return true end
    proofs[#proofs + 1] = r.proof
    local token = grant(head, r, expiry, now_ms, now_us, true)
    granted[#granted + 1] = head
    granted[#granted + 1] = token
    granted[#granted + 1] = now_ms
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

-- The name's keys no longer expire (drained, or with a fleet limit: what
-- an operator set stays until taken back); idle() sets an expiry again
-- once neither holds.
local function persist()
  st.expires, st_dirty, census_bound_due = 0, true, true
  redis.call('ZADD', K_CENSUS, 'inf', census_member)
  redis.call('PERSIST', K_HOLDERS)
  redis.call('PERSIST', K_QUEUE)
  redis.call('PERSIST', K_WAITERS)
  redis.call('PERSIST', K_CLOCK)
end

-- Every script but status ends here: a name nobody touches for idle_ms
-- leaves Redis (not while it is drained or has a fleet limit: drain.lua
-- and limit.lua take its expiry away). All its keys leave at one time, the state's EXPIRES_MS:
-- set again (on every key) when a call that knows the time finds it more
-- than a quarter of idle_ms off now + idle_ms, and given to each key a
-- call made; made earlier only while nobody holds or waits (callers' idle
-- times differ: a user's names get minutes, root's a day, a host's own
-- slot twice host_lease; a shorter one must not cut short a lease that
-- another caller's longer time covers). So most calls write no expiry,
-- and the hash never outlives the ZSETs it counts. Writes what the call
-- changed; returns reply.
-- idle_due() is a call's part of that, which a batch (batch.lua) takes
-- after each of its calls, as each would alone; idle(nil, reply) then writes.
-- The census' expiry, set again after a call wrote it: its latest entry's
-- time, and CENSUS_UNTIL in the fleet's clock key with it (forgot.lua,
-- census_left()); while an entry never leaves ('inf'), or it holds only
-- its mark, it never expires (CENSUS_UNTIL 0). A clock key that is
-- missing takes no time: the census never expires then either. The cost:
-- a ZRANGE and a PEXPIREAT a write of the census (a name's expiry moved,
-- every quarter of its idle time), and a write of the clock key when the
-- time moved.
local function census_bound()
  census_bound_due = false
  if not fleet_known and not fleet_due then fleet_read() end
  fleet_known = true
  local top = tonumber(redis.call('ZRANGE', K_CENSUS, -1, -1, 'WITHSCORES')[2])
  local until_ms = fleet.last and top and top > 0 and top < math.huge and top or 0
  if until_ms > 0 then
    redis.call('PEXPIREAT', K_CENSUS, digits(until_ms))
  else
    redis.call('PERSIST', K_CENSUS)
  end
  if fleet.last and (fleet.census_until or 0) ~= until_ms then fleet.census_until, fleet_due = until_ms, true end
end

local idle_again = false
local function idle_due(idle_ms)
  idle_ms = tonumber(idle_ms) or 0
  if st and now_read and idle_ms > 0 and not st.drain and not st.cap then
    local until_ms = now_ms_ + idle_ms
    if st_new or until_ms - st.expires > idle_ms / 4 or
        (st.expires - until_ms > idle_ms / 4 and st.held == 0 and st.line == 0) then
      st.expires, st_dirty, idle_again = until_ms, true, true
    end
  end
  st_new, now_read = false, false
end
local function idle(idle_ms, reply)
  if idle_ms ~= nil then idle_due(idle_ms) end
  flush()
  if census_look and st and not idle_again and (st.held > 0 or st.line > 0) then census_keep() end
  if census_made then
    redis.call('ZADD', K_CENSUS, -census_made, CENSUS_MARK)
    census_made, census_bound_due = false, true
  end
  if idle_again then
    -- The census learns when the name leaves; names that left go from it.
    redis.call('ZADD', K_CENSUS, st.expires, census_member)
    redis.call('ZREMRANGEBYSCORE', K_CENSUS, 0, '(' .. digits(now_ms_))
    census_bound_due = true
    redis.call('PEXPIREAT', K_CLOCK, st.expires)
    if st.held > 0 then redis.call('PEXPIREAT', K_HOLDERS, st.expires) end
    if st.line > 0 then
      redis.call('PEXPIREAT', K_QUEUE, st.expires)
      redis.call('PEXPIREAT', K_WAITERS, st.expires)
    end
  elseif st and st.expires > 0 then
    for key in pairs(created) do redis.call('PEXPIREAT', key, st.expires) end
  end
  if census_bound_due then census_bound() end
  if fleet_due then fleet_write() end
  return reply
end
