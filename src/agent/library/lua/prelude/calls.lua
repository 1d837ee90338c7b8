-- The prelude, after line.lua: where every call starts, and the calls.

-- ---- Where every call starts: no state carries from one call to the
-- next (embed-lua.py refuses a prelude whose top level declares a
-- variable these do not set). begin_name(keys, at): the name whose keys
-- are keys[at..] (keys.list's order; the fleet's clock and the census are
-- the last two KEYS), with nothing of it read yet; begin_call(keys): a new
-- call, at a time not yet read, on the name of keys[1..].
local function begin_name(keys, at)
  K_HOLDERS, K_QUEUE, K_WAITERS, K_CLOCK = keys[at], keys[at + 1], keys[at + 2], keys[at + 3]
  K_FLEET_CLOCK, K_CENSUS = keys[#keys - 1], keys[#keys]
  census_member = string.sub(K_HOLDERS, 1, -#'holders' - 2)
  st, st_new, st_drain_, st_cap_, st_forgot_ = nil, false, nil, nil, nil
  st_dirty, forgot_dirty, drain_dirty = false, false, false
  rec, dirty, created = {}, {}, {}
  census_made, expired, expired_ttl, expired_grace, idle_again = false, false, false, false, false
  census_look, census_young, census_bound_due = false, false, false
end
local function begin_call(keys)
  now_ms_, now_us_, now_read = nil, nil, false
  fleet, fleet_due, fleet_known, run_id_ = {}, false, false, nil
  begin_name(keys, 1)
end

-- ---- The calls a batch can hold (batch.lua); each script of the same name
-- is one of them alone. Each takes its ARGV (A_<SCRIPT>_<NAME> from
-- scripts.list) and returns its reply; the caller ends with idle().

-- A lease whose record says it holds, asked for again (acquire, reassert,
-- adopt): extended until now_ms + ttl while its entry is there (true);
-- else its entry was lost, and so are its record and the counts
-- (entry_lost(); false).
local function hold_again(lease, now_ms, ttl)
  if redis.call('ZSCORE', K_HOLDERS, lease) then
    redis.call('ZADD', K_HOLDERS, now_ms + ttl, lease)
    return true
  end
  entry_lost(lease)
  return false
end

-- The proof (optional) is kept while the lease waits, for the grant
-- message. Returns {-1} when the lease is another host's or user's (or
-- revoked), {-2} when it asks for no number of slots (0) and the name has
-- no fleet limit,
-- {-3, limit} when its weight is above the limit in force (it would never
-- fit);
-- {1, token, since_ms, held, limit} when it holds a slot (now or already);
-- else {0, position, held, limit, ms until the first holder expires or -1,
-- ms the name still grants it nothing (a reset's grace, a loss: 0 none),
-- and the drain record while the name is drained}.
local function acquire_call(argv)
  local lease, slots = argv[A_ACQUIRE_LEASE], tonumber(argv[A_ACQUIRE_SLOTS])
  local ttl, desc = tonumber(argv[A_ACQUIRE_TTL_MS]), argv[A_ACQUIRE_DESCRIPTION]
  local host, uid = argv[A_ACQUIRE_HOST], argv[A_ACQUIRE_UID]
  local grace_until = tonumber(argv[A_ACQUIRE_GRACE_UNTIL_MS]) or 0
  local proof, weight = argv[A_ACQUIRE_PROOF], tonumber(argv[A_ACQUIRE_WEIGHT]) or 1
  local hold = argv[A_ACQUIRE_HOLD] == '1'
  local now_ms, now_us = now()
  fetch({lease})
  expire(now_ms, ttl, grace_until)
  -- A slot a host holds itself may be lost in a reset while its host is
  -- down (it reboots): that host can neither put it back nor fence itself
  -- until it is up, which takes up to its lease (host_lease, this
  -- caller's ttl). Such slots are granted nothing for that long after the
  -- reset's grace (the grace never starts before the reset), as after
  -- Redis forgot the name (forgot_left()). (Only here: grant_next() leaves
  -- them to their own acquire.)
  local grants_from = grace_until
  if grace_until > 0 and hold then grants_from = grace_until + ttl end

  local r = rec[lease]
  if r and (foreign(r, host, uid) or revoked(r)) then return {R_ACQUIRE_REFUSED} end

  if r and r.token > 0 then
    if hold_again(lease, now_ms, ttl) then
      return {R_ACQUIRE_GRANTED, r.token, r.since, st.held, limit_in_force(slots)}
    end
    r = nil
  end
  if slots == 0 and not cap() then return {R_ACQUIRE_NO_LIMIT} end
  -- The limit in force with its own ask, before it counts among them.
  local own_limit = limit_in_force(slots)
  if slots > 0 then own_limit = math.min(slots, own_limit) end
  if weight > own_limit then return {R_ACQUIRE_TOO_HEAVY, own_limit} end

  -- First come, first served: granted while the weights of those before
  -- it in line and its own fit under the limit in force with the holders',
  -- so a newcomer never overtakes anyone queued before it (nor a light job
  -- a heavy one at the head). During the grace period after a reset, and
  -- while the name is drained, nobody is granted anything (a drained
  -- name's waiters keep their places).
  local held = st.held

  -- Nobody in line and room for it: straight in, without a ticket.
  if st.line == 0 and may_grant(now_ms, grants_from, ttl) and held + weight <= own_limit then
    r = newcomer(lease, slots, host, uid, desc, weight, hold)
    local token = grant(lease, r, now_ms + ttl, now_ms, now_us, false)
    return {R_ACQUIRE_GRANTED, token, now_ms, held + weight, own_limit}
  end

  -- In line already (its record says it waits), or at its end.
  local rank = r and redis.call('ZRANK', K_QUEUE, lease)
  if not r then r = newcomer(lease, slots, host, uid, desc, weight, hold) end
  if rank then
    redis.call('ZADD', K_WAITERS, now_ms + ttl, lease)
  else
    enqueue(lease, now_ms + ttl)
    rank = redis.call('ZRANK', K_QUEUE, lease)
  end

  local limit = limit_in_force(slots)
  if may_grant(now_ms, grants_from, ttl) and held + r.weight <= limit and rank < limit - held then
    -- (Each before it weighs 1 at least: only then can it fit.)
    local ahead = 0
    if rank > 0 then
      local before = redis.call('ZRANGE', K_QUEUE, 0, rank - 1)
      fetch(before)
      for _, l in ipairs(before) do ahead = ahead + (rec[l] and rec[l].weight or 1) end
    end
    if held + ahead + r.weight <= limit then
      local token = grant(lease, r, now_ms + ttl, now_ms, now_us, true)
      return {R_ACQUIRE_GRANTED, token, now_ms, held + r.weight, limit}
    end
  end
  if proof and proof ~= '' and proof ~= r.proof then
    r.proof = proof
    put(lease, r)
  end

  -- When to look again: the first holder's expiry, or the end of the lease
  -- after Redis forgot the name or after a reset, whichever comes first.
  -- `left`, how long the name grants this caller nothing whatever the
  -- line, goes to its agent too: its caller is told why it waits.
  local first = redis.call('ZRANGE', K_HOLDERS, 0, 0, 'WITHSCORES')
  local next_expiry = -1
  local left = math.floor(math.min(math.max(forgot_left(now_ms, ttl), grants_from - now_ms, 0), 2 ^ 52))
  -- (Swept above: none has run out. Never below 0 all the same.)
  if first[2] then next_expiry = math.max(0, tonumber(first[2]) - now_ms) end
  if left > 0 and (next_expiry < 0 or left < next_expiry) then next_expiry = left end
  return {R_ACQUIRE_QUEUED, rank + 1, held, limit, next_expiry, left, st.drain or nil}
end

-- Gives the slot back (or leaves the queue) and hands what that frees to
-- the next in line. Returns {-1} when the lease is another host's or
-- user's, else {held, lease, token, since, ...}: 1 if it held, then each
-- waiter granted. Needs the time only when someone waits.
local function release_call(argv)
  local lease, host, uid = argv[A_RELEASE_LEASE], argv[A_RELEASE_HOST], argv[A_RELEASE_UID]
  local grace_until = tonumber(argv[A_RELEASE_GRACE_UNTIL_MS]) or 0
  fetch({lease})
  local r = rec[lease]
  if not r then return {R_RELEASE_NOT_HELD} end
  if foreign(r, host, uid) then return {R_RELEASE_REFUSED} end
  state()

  local held, queued = 0, 0
  if r.token > 0 then
    held = redis.call('ZREM', K_HOLDERS, lease)
    st.held = st.held - held * r.weight
  else
    queued = redis.call('ZREM', K_QUEUE, lease)
    st.line = st.line - queued
    redis.call('ZREM', K_WAITERS, lease)
  end
  if held + queued == 1 then forget(lease) else entry_lost(lease) end
  local granted, proofs = {}, {}
  -- A place in line also matters: those behind it may now be first. During
  -- the grace period after a reset, and while drained, the slot stays free.
  if (held == 1 and st.line > 0) or queued == 1 then
    local now_ms, now_us = now()
    expire(now_ms, nil, grace_until)
    local judged = true
    if may_grant(now_ms, grace_until) then judged = grant_next(now_ms, now_us, granted, proofs) end
    if #granted > 0 then wake(granted_message(granted, proofs)) end
    -- Those behind a lease that left the line have a new place.
    if not judged or queued == 1 then wake() end
  end
  local reply = {held == 1 and R_RELEASE_RELEASED or R_RELEASE_NOT_HELD}
  for _, v in ipairs(granted) do reply[#reply + 1] = v end
  return reply
end

-- Extends the entries of `list` in the ZSET `key` (holders or waiters)
-- until now_ms + ttl, in one ZMSCORE and one ZADD: those run out (not
-- swept: nobody waits) or gone go to `missing` instead.
local function renew_kind(key, list, now_ms, ttl, missing)
  if #list == 0 then return end
  local until_ms, renewed, gone = now_ms + ttl, {}, {}
  for i = 1, #list, 4000 do
    for j, v in ipairs(redis.call('ZMSCORE', key, unpack(list, i, math.min(i + 3999, #list)))) do
      local lease, score = list[i + j - 1], tonumber(v)
      if score and score > now_ms then
        renewed[#renewed + 1] = until_ms
        renewed[#renewed + 1] = lease
      else
        missing[#missing + 1] = lease
        if score then gone[#gone + 1] = lease else entry_lost(lease) end
      end
    end
  end
  ran_out(key, gone)
  if #renewed > 0 then each_chunk('ZADD', key, renewed) end
end

-- Extends holders and waiters among leases (one agent's on this name);
-- returns {ms, lease...}: the leases that are neither (expired, revoked,
-- or forgotten) or that belong to another host, after how long the name
-- grants again if Redis forgot it (0: it did not): then the agent puts
-- its holders back (reassert.lua) instead of taking them for lost.
-- The most frequent call of all: it reads of each record only its head,
-- and writes nothing but the expiries unless something changed.
local function renew_call(argv)
  local ttl, host = tonumber(argv[A_RENEW_TTL_MS]), argv[A_RENEW_HOST]
  local leases, texts = {}, {}
  for i = A_RENEW_LEASES, #argv do leases[#leases + 1] = argv[i] end
  local now_ms = now()
  fetch(leases, texts)
  expire(now_ms, ttl, argv[A_RENEW_GRACE_UNTIL_MS], false, true)
  census_look = true
  local missing, holders, waiters = {}, {}, {}
  for _, lease in ipairs(leases) do
    -- (Read before, in this call or an earlier one of the batch: rec has it.)
    local r, h, token, proof = rec[lease], nil, nil, nil
    if r then
      h, token, proof = r.host, r.token, r.proof
    elseif r == nil then
      h, token, proof = string.match(texts[lease] or '', RECORD_HEAD)
      token = tonumber(token)
    end
    if h ~= host or (token > 0 and proof == REVOKED) then
      missing[#missing + 1] = lease
      -- Its record gone (the hash's field alone) and its entry still
      -- there: Redis forgot part of the name, and its agent puts it back.
      if not h and redis.call('ZSCORE', K_HOLDERS, lease) then record_lost() end
    elseif token > 0 then
      holders[#holders + 1] = lease
    else
      waiters[#waiters + 1] = lease
    end
  end
  renew_kind(K_HOLDERS, holders, now_ms, ttl, missing)
  renew_kind(K_WAITERS, waiters, now_ms, ttl, missing)
  table.insert(missing, 1, math.floor(forgot_left(now_ms, ttl)))
  return missing
end

-- After Redis came back without this holder (restarted without its data, or
-- a failover lost it): puts it back if a slot is free, also during the grace
-- period. Returns 1 if it holds, 0 if lost, -1 if the lease is another
-- host's or user's, or revoked.
local function reassert_call(argv)
  local lease, slots = argv[A_REASSERT_LEASE], tonumber(argv[A_REASSERT_SLOTS])
  local token, since = tonumber(argv[A_REASSERT_TOKEN]), tonumber(argv[A_REASSERT_SINCE_MS])
  local ttl, desc = tonumber(argv[A_REASSERT_TTL_MS]), argv[A_REASSERT_DESCRIPTION]
  local host, uid = argv[A_REASSERT_HOST], argv[A_REASSERT_UID]
  local weight = tonumber(argv[A_REASSERT_WEIGHT]) or 1
  local hold = argv[A_REASSERT_HOLD] == '1'
  local now_ms, now_us = now()
  fetch({lease})
  -- Only after a reset, of which grace_until tells: what Redis has from
  -- before it is old data, not a clock step.
  expire(now_ms, ttl, argv[A_REASSERT_GRACE_UNTIL_MS])

  local r = rec[lease]
  if r and (foreign(r, host, uid) or revoked(r)) then return R_REASSERT_REFUSED end
  if r and r.token > 0 then
    if hold_again(lease, now_ms, ttl) then return R_REASSERT_HELD end
    r = nil
  end
  -- Its entry is there but not its record (the hash was forgotten alone):
  -- it holds, counted as 1 unit; its record and weight come back. (Put
  -- back either way, it holds anew: its name's census entry is looked
  -- for, as after grant().)
  if not r and redis.call('ZSCORE', K_HOLDERS, lease) then
    census_look = true
    r = newcomer(lease, slots, host, uid, desc, weight, hold)
    r.token, r.since = token, since
    st.held = count_held()
    redis.call('ZADD', K_HOLDERS, now_ms + ttl, lease)
    st.token = math.max(st.token or token_clock(now_us), token)
    return R_REASSERT_HELD
  end
  -- (A holder that asked for no number, when the fleet limit went with the
  -- data too, is put back: all such holders held within the limit then,
  -- and nobody is granted anything without one.)
  local limit = limit_in_force(slots)
  if slots > 0 then limit = math.min(slots, limit) end
  if limit and limit > 0 and st.held + weight > limit then
    return R_REASSERT_LOST
  end
  -- A waiter it was: out of the line.
  if r then
    st.line = st.line - redis.call('ZREM', K_QUEUE, lease)
    redis.call('ZREM', K_WAITERS, lease)
    forget(lease)
  end
  r = newcomer(lease, slots, host, uid, desc, weight, hold)
  r.token, r.since, census_look = token, since, true
  if st.held == 0 then created[K_HOLDERS] = true end
  st.held = st.held + redis.call('ZADD', K_HOLDERS, now_ms + ttl, lease) * weight
  -- The fencing token never goes back: not below the tokens' clock, if the
  -- counter was lost, nor below the token this holder has.
  st.token = math.max(st.token or token_clock(now_us), token)
  return R_REASSERT_HELD
end

-- For an agent that restarted: does this lease hold? Returns {1, token,
-- since_ms, description}; {2, token, since_ms, description} when it held
-- and Redis forgot part of the name since: its record without its entry,
-- or its entry without its record (a release, a revoke and a lease that
-- ran out take both; an operator's DEL or HDEL takes one). The name is
-- marked forgotten (it grants nothing for a lease) and the agent puts the
-- holder back (reassert.lua), as its renewal would have: with its token,
-- or, its record lost with it, with a new one above every token of the
-- name (the holder's own is below it: fencing holds) and the description
-- "" (the agent describes it again). {0} when only queued; {-1} when
-- gone, revoked, or another host's or user's. A name whose keys all went
-- tells nothing of the lease, which held or only waited: its agent says
-- (held: "1" when its own record has the grant), and a lease it held of
-- a name found forgotten (within the lease of grace that follows) is
-- forgotten with a new token, as above; else gone.
local function adopt_call(argv)
  local lease, ttl = argv[A_ADOPT_LEASE], tonumber(argv[A_ADOPT_TTL_MS])
  local now_ms, now_us = now()
  fetch({lease})
  expire(now_ms, ttl, argv[A_ADOPT_GRACE_UNTIL_MS])
  local r = rec[lease]
  if r and (foreign(r, argv[A_ADOPT_HOST], argv[A_ADOPT_UID]) or revoked(r)) then return {R_ADOPT_GONE} end
  if r and r.token > 0 then
    if hold_again(lease, now_ms, ttl) then return {R_ADOPT_HELD, r.token, r.since, r.desc} end
    return {R_ADOPT_FORGOTTEN, r.token, r.since, r.desc}
  end
  if r then return {R_ADOPT_QUEUED} end
  if redis.call('ZSCORE', K_HOLDERS, lease) then
    record_lost()
    return {R_ADOPT_FORGOTTEN, next_token(now_us), now_ms, ''}
  end
  if argv[A_ADOPT_HELD] == '1' and state() and forgot_left(now_ms, ttl) > 0 then
    return {R_ADOPT_FORGOTTEN, next_token(now_us), now_ms, ''}
  end
  return {R_ADOPT_GONE}
end

-- Each kind of call a batch holds (batch.lua): its function and which
-- argument is idle_ms (scripts.list). Made once, when the library loads;
-- nothing changes it.
local BATCH_KINDS = {
  acquire = {acquire_call, A_ACQUIRE_IDLE_MS},
  release = {release_call, A_RELEASE_IDLE_MS},
  renew = {renew_call, A_RENEW_IDLE_MS},
  reassert = {reassert_call, A_REASSERT_IDLE_MS},
  adopt = {adopt_call, A_ADOPT_IDLE_MS},
}
-- … those that grow nothing in Redis: a holder's renewal and its release
-- (keep.lua runs them when Redis is full).
local KEEP_KINDS = {release = BATCH_KINDS.release, renew = BATCH_KINDS.renew}

-- A batch's calls (batch.lua, keep.lua: KEYS, ARGV; its keys checked by
-- bad_call()), of the kinds given (any other is malformed): each run as
-- its own script would, their replies in order. Each call's arguments are
-- checked as its script's (bad_args()) before any call runs.
local function run_batch(KEYS, ARGV, kinds, batch)
  local names = (#KEYS - 2) / NAME_KEYS
  local function count(s, high)
    if s and #s <= 16 and string.find(s, '^%d+$') and tonumber(s) <= high then return tonumber(s) end
  end
  local calls, i = {}, 1
  while i <= #ARGV do
    local kind, name, n = kinds[ARGV[i]], count(ARGV[i + 1], names), count(ARGV[i + 2], #ARGV)
    if not kind or not name or name < 1 or not n or i + 2 + n > #ARGV then
      return redis.error_reply('ERR fleetsem: malformed call at argument ' .. i .. ' of ' .. batch .. ': not a kind ' ..
        'it runs, a name among its keys (1 to ' .. names .. ') and how many arguments follow')
    end
    local argv = {}
    for k = i + 3, i + 2 + n do argv[#argv + 1] = ARGV[k] end
    local bad = bad_args(ARGV[i], argv, 'call ' .. #calls + 1 .. ' (' .. ARGV[i] .. ') of ' .. batch, i + 3)
    if bad then return bad end
    calls[#calls + 1] = {kind, argv, name}
    i = i + 3 + n
  end
  -- Each call moves its name's expiry with its own idle time, as it would
  -- alone; the writes are the batch's, each name's done (idle()) before the
  -- next name's calls, as the end of a call does. The time is the batch's;
  -- the fleet's clock is read once, by the first sweep (observe()), and
  -- written when due at each name's end, as separate calls would: the next
  -- name sees what the one before left (what a GET would find: only this
  -- script writes it meanwhile). A name again later (the agent sends
  -- each name's calls together, but the script does not rely on it) starts
  -- again from what Redis has, as another call would.
  local replies, on = {}, 1
  for _, c in ipairs(calls) do
    local kind, argv, name = c[1], c[2], c[3]
    if name ~= on then
      idle(nil)
      begin_name(KEYS, NAME_KEYS * (name - 1) + 1)
      on = name
    end
    replies[#replies + 1] = kind[1](argv)
    idle_due(argv[kind[2]])
  end
  return idle(nil, replies)
end
