-- Shared by every script; the K_ locals above it come from keys.list.
-- Per name, all with the hash tag {NAME}:
--   holders (ZSET lease -> expiry ms)   queue (ZSET lease -> ticket)
--   waiters (ZSET lease -> expiry ms)
--   clock (HASH): the name's state and a record of each lease that holds
--   or waits; see "The name's hash" below.
-- and one key for all names, K_FLEET_CLOCK (the last KEY; see observe()).
-- Every time comes from the server's clock: no client clock is trusted.
-- Only functions here: the epoch script has other KEYS and uses none of them.

-- The server's clock in ms and in µs, read once a call (a batch of calls
-- happens at one time).
local now_ms_, now_us_
local now_read = false  -- this call asked for the time (idle_due())
local function now()
  now_read = true
  if not now_ms_ then
    local t = redis.call('TIME')
    local sec, usec = tonumber(t[1]), tonumber(t[2])
    now_ms_, now_us_ = sec * 1000 + math.floor(usec / 1000), sec * 1000000 + usec
  end
  return now_ms_, now_us_
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

-- One command on many members or fields, a few thousand at a time (Lua's
-- unpack() has a limit). Returns the sum of the replies.
local function each_chunk(cmd, key, list)
  local sum = 0
  for i = 1, #list, 4000 do
    sum = sum + redis.call(cmd, key, unpack(list, i, math.min(i + 3999, #list)))
  end
  return sum
end

-- ---- The name's hash, K_CLOCK --------------------------------------------
-- Field '.' holds the name's state,
--   "HELD LINE LIMIT AT_LIMIT TOKEN TICKET TTL_MS OFFSET_MS EXPIRES_MS":
-- how many hold and how many are in line (the sizes of holders and queue,
-- kept with every change to those, so that no call has to count them),
-- the limit in force and how many of them asked for exactly it (LIMIT -1:
-- not known since the last of those left; read again from the records
-- when asked), the last fencing token and ticket handed out, the lease of
-- the last caller that knew one, the fleet clock's offset the expiries are
-- on (see observe()), and when the name's keys leave Redis (0: never).
-- Field '!', while the name is drained (no new grant: drain.lua), says by
-- whom and why: "HOST UID SINCE_MS USER REASON". Field '#', while the
-- name has a fleet limit (limit.lua), says it, who set it and why:
-- "N HOST UID SINCE_MS USER REASON". Field '@' is the last
-- operator action that changed the name, "ACTION HOST UID AT_MS USER
-- REASON" (drain.lua, revoke.lua, limit.lua), for status; no other script
-- reads it.
-- Every other field is a lease that holds or waits, with its record
--   "HOST UID SLOTS TOKEN SINCE_MS PROOF [*WEIGHT ]DESCRIPTION"
-- (SLOTS 0: it asked for no limit of its own, the fleet limit's caller;
-- WEIGHT, when above 1, the units of the limit it takes: HELD counts
-- units, not holders)
-- (TOKEN and SINCE_MS 0 while it waits; PROOF, a secret of the waiter's
-- agent for the grant message, '-' when none). So a call reads what it
-- needs of the name in one HMGET and writes it back in one HSET.
-- The key keeps the name of the first data model's clock key, a string
-- that that model's scripts read (GET) before anything else: an agent of
-- that model fails on a name this model holds, and this one refuses a
-- name that model holds (first_model()), so the two never count one
-- name's slots apart.
local STATE, DRAIN, ACTION, CAP, FORGOT = '.', '!', '@', '#', '~'
local st                -- the name's state, once read (st.drain: the drain record, or false;
                        -- st.cap: the fleet limit's record, or false; st.forgot: see forgot_left())
local st_new = false    -- it was not in Redis: counted from the ZSETs
local st_drain_         -- the drain record read with the state (false: none)
local st_cap_           -- the fleet limit's record read with it (false: none)
local st_forgot_        -- the forget mark read with it (false: none)
local st_dirty = false
local forgot_dirty = false
local drain_dirty = false
local rec = {}          -- lease -> its record, false: none (read or written this call)
local dirty = {}        -- lease -> true: its record changed (rec has it, false: deleted)
local created = {}      -- ZSETs this call made (they need the name's expiry)

local function parse_record(v)
  local host, uid, slots, token, since, proof, desc =
    string.match(v or '', '^(%S+) (%d+) (%d+) (%d+) (%d+) (%S+) (.*)$')
  if not host then return false end
  local weight, rest = string.match(desc, '^%*(%d+) (.*)$')
  return {host = host, uid = uid, slots = tonumber(slots), token = tonumber(token), since = tonumber(since),
    proof = proof, weight = tonumber(weight) or 1, desc = rest or desc}
end
-- A record's host, token and proof (what a renewal checks), from its text:
-- it matches exactly the texts parse_record() accepts.
local RECORD_HEAD = '^(%S+) %d+ %d+ (%d+) %d+ (%S+) '
-- (One string.format each, not a digits() a number and a table.concat:
-- the same text, at half the Lua; a grant writes a record and two states.)
local function record_text(r)
  if r.weight > 1 then
    return string.format('%s %s %.0f %.0f %.0f %s *%.0f %s', r.host, r.uid, r.slots, r.token, r.since, r.proof,
      r.weight, r.desc)
  end
  return string.format('%s %s %.0f %.0f %.0f %s %s', r.host, r.uid, r.slots, r.token, r.since, r.proof, r.desc)
end
-- A holder taken back by `fleetsem revoke` (revoke.lua) keeps its record,
-- PROOF 'revoked', and its units in HELD until its agent releases it or
-- its expiry, moved to when it must have fenced itself, runs out: no
-- renewal, acquire or adoption holds it again.
local REVOKED = 'revoked'
local function revoked(r)
  return r.token > 0 and r.proof == REVOKED
end
-- The state's numbers (the words that are numbers), nine of them, or no
-- state (nil). (Nine words that are all numbers, as state_text() writes
-- them, in one match: a grant parses the state twice; anything else word
-- by word.)
local STATE_PATTERN = '^%s*(%S+)%s+(%S+)%s+(%S+)%s+(%S+)%s+(%S+)%s+(%S+)%s+(%S+)%s+(%S+)%s+(%S+)%s*$'
local function parse_state(v)
  local held, line, limit, at_limit, token, ticket, ttl, offset, expires = string.match(v or '', STATE_PATTERN)
  held, line, limit, at_limit, token = tonumber(held), tonumber(line), tonumber(limit), tonumber(at_limit), tonumber(token)
  ticket, ttl, offset, expires = tonumber(ticket), tonumber(ttl), tonumber(offset), tonumber(expires)
  if held and line and limit and at_limit and token and ticket and ttl and offset and expires then
    return {held = held, line = line, limit = limit, at_limit = at_limit, token = token, ticket = ticket, ttl = ttl,
      offset = offset, expires = expires}
  end
  local n = {}
  for f in string.gmatch(v or '', '%S+') do n[#n + 1] = tonumber(f) end
  if #n ~= 9 then return nil end
  return {held = n[1], line = n[2], limit = n[3], at_limit = n[4], token = n[5], ticket = n[6], ttl = n[7],
    offset = n[8], expires = n[9]}
end
local function state_text(s)
  return string.format('%.0f %.0f %.0f %.0f %.0f %.0f %.0f %.0f %.0f', s.held, s.line, s.limit, s.at_limit, s.token or 0,
    s.ticket, s.ttl or 0, s.offset or 0, s.expires)
end

-- The name's keys are of the first data model: an agent of an earlier
-- fleetsem uses this name, or did. Its string "LAST_MS TTL_MS OFFSET_MS"
-- says when it last did: within two of its leases, its holders may live,
-- and the call is refused (an error naming the key); after that none can,
-- and the name's keys start again (tokens stay above the old ones: a
-- missing counter starts from the tokens' clock).
local function first_model()
  local last, ttl = string.match(redis.call('GET', K_CLOCK) or '', '^(%d+) (%d+)')
  local now_ms = now()
  if last and now_ms - tonumber(last) < 2 * tonumber(ttl) then
    error({err = 'FLEETSEM ' .. K_CLOCK .. ' is of data model 1 (fleetsem 0.1), in use by an agent of an earlier ' ..
      'fleetsem; this agent speaks data model 2 (fleetsem >= 0.2): upgrade every agent (fleetsemd(8), UPGRADING); ' ..
      'the name is taken over two leases after its last use'})
  end
  redis.call('DEL', K_CLOCK, K_HOLDERS, K_QUEUE, K_WAITERS)
end

-- Reads the state (once) and the records of `leases` not read yet, in one
-- HMGET (a few thousand fields at a time). With `texts`, each such record
-- goes there as Redis has it (false: none), unparsed and not kept in rec:
-- a renewal reads only its head (renew_call()).
local function fetch(leases, texts)
  local fields = {}
  if not st then fields[1], fields[2], fields[3], fields[4] = STATE, DRAIN, CAP, FORGOT end
  for _, lease in ipairs(leases) do
    if lease == STATE or lease == DRAIN or lease == CAP or lease == ACTION or lease == FORGOT then
      error({err = 'FLEETSEM a lease may not be named "' .. lease .. '"'})
    end
    if rec[lease] == nil then fields[#fields + 1] = lease end
  end
  for i = 1, #fields, 4000 do
    local part = #fields <= 4000 and fields or {unpack(fields, i, math.min(i + 3999, #fields))}
    local got = redis.pcall('HMGET', K_CLOCK, unpack(part))
    if got.err then
      first_model()
      got = redis.call('HMGET', K_CLOCK, unpack(part))
    end
    for j, f in ipairs(part) do
      if f == STATE then
        st = parse_state(got[j])
      elseif f == DRAIN then
        st_drain_ = got[j] or false
      elseif f == CAP then
        st_cap_ = got[j] or false
      elseif f == FORGOT then
        st_forgot_ = tonumber(got[j]) or false
      elseif texts then
        texts[f] = got[j] or false
      else
        rec[f] = parse_record(got[j])
      end
    end
  end
  if st and st.drain == nil then st.drain = st_drain_ or false end
  if st and st.cap == nil then st.cap = st_cap_ or false end
  if st and st.forgot == nil then st.forgot = st_forgot_ or false end
end

-- The units the holders take: the sum of their weights (a holder without
-- a record counts 1).
local function count_held()
  local holders = redis.call('ZRANGE', K_HOLDERS, 0, -1)
  fetch(holders)
  local n = 0
  for _, lease in ipairs(holders) do n = n + (rec[lease] and rec[lease].weight or 1) end
  return n
end

-- ---- What Redis forgot ---------------------------------------------------
-- Redis can lose a name's keys while it stays up (FLUSHALL, FLUSHDB, a DEL,
-- eviction), and a name whose state is gone looks new. So each Redis (in a
-- Cluster each hash slot: the census key, the KEY after K_FLEET_CLOCK) keeps
-- a census, a ZSET of the names that should be there: "P:{NAME}" -> when
-- its keys leave Redis (its EXPIRES_MS, +inf while they never do), written
-- only when that time is set again (idle()), read only when a name's
-- state is missing. Its member CENSUS_MARK has minus the time the census
-- itself was made (negative, so that trimming the names that left never
-- takes it). A name whose state is missing was forgotten when
--   the census is missing too (all of fleetsem's keys went: it is made
--     again, and every name made while it is younger than a lease is
--     taken for forgotten at that time), or
--   the census says its keys should still be there;
-- and so is a name whose records and ZSETs disagree (entry_lost()). Such a
-- name is marked (its field FORGOT: the time it was found forgotten) and
-- grants nothing for a lease after that, while the agents whose holders
-- it lost put them back (reassert.lua: their renewals say so, forgot_left());
-- a holder whose agent cannot reach Redis fences itself within that
-- lease. The mark goes once the lease is over.
local CENSUS_MARK = '.'
local census_member             -- the name's member of the census (begin_name())
local census_made = false       -- made by this call: its mark is written in idle()

-- When the name, found without its state, was forgotten (false: it is new).
local function census_forgot()
  local now_ms = now()
  local got = redis.call('ZMSCORE', K_CENSUS, census_member, CENSUS_MARK)
  local expires, made = tonumber(got[1]), tonumber(got[2])
  if not made then
    census_made = now_ms
    return now_ms
  end
  if expires and expires > now_ms then return now_ms end
  -- (The census' own age: a lease later, the mark of a name made now is
  -- found past, and dropped, by the first caller that knows its lease.)
  return -made
end

-- The state, counted from the ZSETs when Redis has none (a new name, or
-- one whose hash left before its other keys, or one Redis forgot).
local function state()
  if not st then
    st = {held = count_held(), line = redis.call('ZCARD', K_QUEUE), limit = -1, at_limit = 0,
      ticket = 0, expires = 0, drain = st_drain_ or false, cap = st_cap_ or false, forgot = census_forgot()}
    st_new, st_dirty, forgot_dirty = true, true, st.forgot ~= false
  end
  return st
end

-- How long the name still grants nothing because Redis forgot it (0:
-- not, or no longer: the mark goes). `ttl`: the caller's lease, else the
-- name's last caller's; unknown, the whole time is left.
local function forgot_left(now_ms, ttl)
  if not st.forgot then return 0 end
  ttl = tonumber(ttl) or st.ttl
  if not ttl or ttl <= 0 then return math.huge end
  local left = st.forgot + ttl - now_ms
  if left > 0 then return left end
  st.forgot, forgot_dirty = false, true
  return 0
end

-- Whether a slot may be handed out now: not in the grace after a reset,
-- nor in the lease after Redis forgot the name, nor while it is drained.
local function may_grant(now_ms, grace_until, ttl)
  return now_ms >= grace_until and not st.drain and forgot_left(now_ms, ttl) == 0
end

-- `lease`'s record says it holds or waits, but its ZSET entry is gone (not
-- by a script: evicted, or removed by hand). Its record goes too, and the
-- counts are taken again from the ZSETs, so they stay right.
local function entry_lost(lease)
  st.forgot, forgot_dirty = now(), true
  rec[lease], dirty[lease] = false, true
  redis.call('ZREM', K_HOLDERS, lease)
  redis.call('ZREM', K_QUEUE, lease)
  redis.call('ZREM', K_WAITERS, lease)
  st.held, st.line, st.limit, st_dirty = count_held(), redis.call('ZCARD', K_QUEUE), -1, true
end

-- The fleet limit (`fleetsem limit --fleet`), or nil.
local function cap()
  return st.cap and tonumber(string.match(st.cap, '^(%d+) ')) or nil
end

-- The limit in force: the lowest of the fleet limit and the number of
-- slots any holder or waiter of the name asked for (0: none asked);
-- `default` when there is none of these.
local function limit_in_force(default)
  if st.limit < 0 then
    local low, n = 0, 0
    local function count(r)
      if not r or r.slots == 0 then return end
      if low == 0 or r.slots < low then low, n = r.slots, 1 elseif r.slots == low then n = n + 1 end
    end
    local all = redis.call('HGETALL', K_CLOCK)
    for i = 1, #all, 2 do
      if all[i] ~= STATE and all[i] ~= DRAIN and all[i] ~= ACTION and all[i] ~= CAP and rec[all[i]] == nil then
        count(parse_record(all[i + 1]))
      end
    end
    for _, r in pairs(rec) do count(r) end
    st.limit, st.at_limit, st_dirty = low, n, true
  end
  local limit, c = st.limit > 0 and st.limit or default, cap()
  if c and (not limit or limit == 0 or c < limit) then return c end
  return limit
end

-- A new holder or waiter's record, counted in the limit in force.
local function newcomer(lease, slots, host, uid, desc, weight)
  local r = {host = host, uid = uid, slots = slots, token = 0, since = 0, proof = '-', weight = weight or 1, desc = desc}
  rec[lease], dirty[lease], st_dirty = r, true, true
  if slots == 0 then return r end
  if st.limit == 0 or (st.limit > 0 and slots < st.limit) then
    st.limit, st.at_limit = slots, 1
  elseif slots == st.limit then
    st.at_limit = st.at_limit + 1
  end
  return r
end
local function put(lease, r)
  rec[lease], dirty[lease] = r, true
end
-- Everything about `lease` but its ZSET entries.
local function forget(lease)
  local r = rec[lease]
  if r and r.slots > 0 and r.slots == st.limit then
    st.at_limit = st.at_limit - 1
    if st.at_limit <= 0 then st.limit = -1 end
  end
  rec[lease], dirty[lease], st_dirty = false, true, true
end

-- Writes what the call changed in the hash: one HSET, one HDEL.
local function flush()
  local set, del = {}, {}
  for lease in pairs(dirty) do
    if rec[lease] then
      set[#set + 1] = lease
      set[#set + 1] = record_text(rec[lease])
    else
      del[#del + 1] = lease
    end
  end
  if st and st_dirty then
    if st.held + st.line == 0 then st.limit, st.at_limit = 0, 0 end
    set[#set + 1] = STATE
    set[#set + 1] = state_text(st)
  end
  if forgot_dirty then
    if st.forgot then
      set[#set + 1] = FORGOT
      set[#set + 1] = digits(st.forgot)
    elseif st_forgot_ then
      del[#del + 1] = FORGOT
    end
    st_forgot_ = st.forgot
  end
  if drain_dirty then
    if st.drain then
      set[#set + 1] = DRAIN
      set[#set + 1] = st.drain
    else
      del[#del + 1] = DRAIN
    end
  end
  if #set > 0 then each_chunk('HSET', K_CLOCK, set) end
  if #del > 0 then each_chunk('HDEL', K_CLOCK, del) end
  dirty, st_dirty, drain_dirty, forgot_dirty = {}, false, false, false
end

-- true when `r` belongs to another host or user.
local function foreign(r, host, uid)
  return r.host ~= host or r.uid ~= uid
end

-- The fleet's clock key, K_FLEET_CLOCK (the last KEY, one for all names):
-- "LAST_MS OFFSET_MS ERA TOKEN_OFFSET_MS RUN_ID". observe() reads it and
-- says what the first three are; next_token() the others. fleet_write()
-- writes back what `fleet` holds; `fleet_due`: at the end of the call.
local fleet, fleet_due = {}, false
-- Read once a call: a batch's names share it (batch.lua). Nothing but this
-- script writes the key while it runs, and what it writes is `fleet`, so
-- a later name's GET would find what `fleet` holds already.
local fleet_known = false
local function field(w, pattern, default)
  return tonumber(w and string.match(w, pattern)) or default
end
-- (The key as fleet_write() writes it, five words, in one match; anything
-- else word by word, each word checked alone.)
local function fleet_read()
  local text = redis.call('GET', K_FLEET_CLOCK) or ''
  local last, offset, era, token_offset, id = string.match(text, '^(%d+) (%-?%d+) (%d+) (%-?%d+) (%x+)$')
  if last then
    fleet.last, fleet.era, fleet.offset, fleet.token_offset = tonumber(last), tonumber(era), tonumber(offset),
      tonumber(token_offset)
    fleet.run_id = id
    return
  end
  local w = {}
  for f in string.gmatch(text, '%S+') do w[#w + 1] = f end
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
-- A call that hands out a token makes LAST_MS its own time unless that is
-- less than TOKEN_GRAIN_MS old, so that after a step (or silence, which
-- looks the same) that clock goes on from LAST_MS + TOKEN_GRAIN_MS, past
-- the last token: see observe(). (One write of the key in that time, not
-- one a grant.)
local TOKEN_GRAIN_MS = 50
-- In another era (a reset the caller knew of: the same process may be
-- back with old data, whose offset it kept while tokens went on elsewhere)
-- it starts again from 0 too.
local function token_offset_move(id, by, stale)
  if stale or id == '' or id ~= fleet.run_id then
    fleet.token_offset = 0
  else
    fleet.token_offset = math.max(0, fleet.token_offset + by)
  end
  fleet.run_id = id
end
local function token_clock(now_us)
  local now_ms = now()
  if not fleet.last or now_ms >= fleet.last + TOKEN_GRAIN_MS or now_ms < fleet.last then
    fleet.last, fleet_due = now_ms, true
  end
  return math.max(1, now_us - fleet.token_offset * 1000)
end


-- Tokens never go back: one above the last, and never below the tokens'
-- clock, from which a missing counter starts.
local function next_token(now_us)
  st.token, st_dirty = math.max((st.token or 0) + 1, token_clock(now_us)), true
  return st.token
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
-- the offset its expiries are on (its state's OFFSET_MS), and the
-- first script on it after a step moves them by what the offset moved:
-- a step seen ends no lease early, nor makes one last longer. A forward
-- step of at most half a lease is not seen: it is taken as time, and
-- ends leases that much sooner (fleetsemd(8), SAFETY, gives the bound:
-- a sixth of a lease before a cut-off holder fences itself). (A gap in
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
-- the tokens' clock goes on from TOKEN_GRAIN_MS past LAST_MS, past the
-- last token, if not later. A caller that knows no lease
-- (a release on a name Redis lost) sees no step forward.
local function observe(now_ms, ttl, grace_until, looker)
  local offset, last_ttl = st.offset, st.ttl
  ttl = tonumber(ttl) or last_ttl or 0
  -- (Once a call: see fleet_known.)
  if not fleet_known and not fleet_due then fleet_read() end
  fleet_known = true
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
  if id then
    token_offset_move(id, stepped and now_ms - fleet_last - (now_ms > fleet_last and TOKEN_GRAIN_MS or 1) or 0, stale)
  end
  if moved then
    if st.held > 0 then shift(K_HOLDERS, fleet_offset - offset) end
    if st.line > 0 then shift(K_WAITERS, fleet_offset - offset) end
  end
  if id then
    fleet.last, fleet.offset, fleet.era = now_ms, fleet_offset, math.max(fleet.era, grace_until)
    fleet_write()
  end
  if offset ~= fleet_offset or (ttl > 0 and ttl ~= last_ttl) then
    st.offset, st.ttl, st_dirty = fleet_offset, ttl, true
  end
  return true
end

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
      if r and string.find(r.desc, ' hold=host', 1, true) then wake('x ' .. lease .. ' ' .. r.host .. ' host') end
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
-- `queued`. Returns its token.
local function grant(lease, r, expiry, now_ms, now_us, queued)
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
-- gone, or heavier than the limit now is).
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
    if not expiry or not r or r.weight > limit then return false end
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
  st.expires, st_dirty = 0, true
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
-- call made. So most calls write no expiry, and the hash never outlives
-- the ZSETs it counts. Writes what the call changed; returns reply.
-- idle_due() is a call's part of that, which a batch (batch.lua) takes
-- after each of its calls, as each would alone; idle(nil, reply) then writes.
local idle_again = false
local function idle_due(idle_ms)
  idle_ms = tonumber(idle_ms) or 0
  if st and now_read and idle_ms > 0 and not st.drain and not st.cap and
      (st_new or math.abs(st.expires - (now_ms_ + idle_ms)) > idle_ms / 4) then
    st.expires, st_dirty, idle_again = now_ms_ + idle_ms, true, true
  end
  st_new, now_read = false, false
end
local function idle(idle_ms, reply)
  if fleet_due then fleet_write() end
  if idle_ms ~= nil then idle_due(idle_ms) end
  flush()
  if census_made then
    redis.call('ZADD', K_CENSUS, -census_made, CENSUS_MARK)
    census_made = false
  end
  if idle_again then
    -- The census learns when the name leaves; names that left go from it.
    redis.call('ZADD', K_CENSUS, st.expires, census_member)
    redis.call('ZREMRANGEBYSCORE', K_CENSUS, 0, '(' .. digits(now_ms_))
    redis.call('PEXPIREAT', K_CLOCK, st.expires)
    if st.held > 0 then redis.call('PEXPIREAT', K_HOLDERS, st.expires) end
    if st.line > 0 then
      redis.call('PEXPIREAT', K_QUEUE, st.expires)
      redis.call('PEXPIREAT', K_WAITERS, st.expires)
    end
  elseif st and st.expires > 0 then
    for key in pairs(created) do redis.call('PEXPIREAT', key, st.expires) end
  end
  return reply
end

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
end
local function begin_call(keys)
  now_ms_, now_us_, now_read = nil, nil, false
  fleet, fleet_due, fleet_known, run_id_ = {}, false, false, nil
  begin_name(keys, 1)
end

-- ---- The calls a batch can hold (batch.lua); each script of the same name
-- is one of them alone. Each takes its ARGV (A_<SCRIPT>_<NAME> from
-- args.list) and returns its reply; the caller ends with idle().

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
-- and the drain record while the name is drained}.
local function acquire_call(argv)
  local lease, slots = argv[A_ACQUIRE_LEASE], tonumber(argv[A_ACQUIRE_SLOTS])
  local ttl, desc = tonumber(argv[A_ACQUIRE_TTL_MS]), argv[A_ACQUIRE_DESCRIPTION]
  local host, uid = argv[A_ACQUIRE_HOST], argv[A_ACQUIRE_UID]
  local grace_until = tonumber(argv[A_ACQUIRE_GRACE_UNTIL_MS]) or 0
  local proof, weight = argv[A_ACQUIRE_PROOF], tonumber(argv[A_ACQUIRE_WEIGHT]) or 1
  local now_ms, now_us = now()
  fetch({lease})
  expire(now_ms, ttl, grace_until)

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
  if st.line == 0 and may_grant(now_ms, grace_until, ttl) and held + weight <= own_limit then
    r = newcomer(lease, slots, host, uid, desc, weight)
    local token = grant(lease, r, now_ms + ttl, now_ms, now_us, false)
    return {R_ACQUIRE_GRANTED, token, now_ms, held + weight, own_limit}
  end

  -- In line already (its record says it waits), or at its end.
  local rank = r and redis.call('ZRANK', K_QUEUE, lease)
  if not r then r = newcomer(lease, slots, host, uid, desc, weight) end
  if rank then
    redis.call('ZADD', K_WAITERS, now_ms + ttl, lease)
  else
    enqueue(lease, now_ms + ttl)
    rank = redis.call('ZRANK', K_QUEUE, lease)
  end

  local limit = limit_in_force(slots)
  if may_grant(now_ms, grace_until, ttl) and held + r.weight <= limit and rank < limit - held then
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
  -- after Redis forgot the name, whichever comes first.
  local first = redis.call('ZRANGE', K_HOLDERS, 0, 0, 'WITHSCORES')
  local next_expiry, left = -1, forgot_left(now_ms, ttl)
  -- (Swept above: none has run out. Never below 0 all the same.)
  if first[2] then next_expiry = math.max(0, tonumber(first[2]) - now_ms) end
  if left > 0 and (next_expiry < 0 or left < next_expiry) then next_expiry = left end
  return {R_ACQUIRE_QUEUED, rank + 1, held, limit, next_expiry, st.drain or nil}
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
  -- it holds, counted as 1 unit; its record and weight come back.
  if not r and redis.call('ZSCORE', K_HOLDERS, lease) then
    r = newcomer(lease, slots, host, uid, desc, weight)
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
  r = newcomer(lease, slots, host, uid, desc, weight)
  r.token, r.since = token, since
  if st.held == 0 then created[K_HOLDERS] = true end
  st.held = st.held + redis.call('ZADD', K_HOLDERS, now_ms + ttl, lease) * weight
  -- The fencing token never goes back: not below the tokens' clock, if the
  -- counter was lost, nor below the token this holder has.
  st.token = math.max(st.token or token_clock(now_us), token)
  return R_REASSERT_HELD
end

-- For an agent that restarted: does this lease hold? Returns {1, token,
-- since_ms, description}, {0} when only queued, {-1} when gone, revoked,
-- or another host's or user's.
local function adopt_call(argv)
  local lease, ttl = argv[A_ADOPT_LEASE], tonumber(argv[A_ADOPT_TTL_MS])
  local now_ms = now()
  fetch({lease})
  expire(now_ms, ttl, argv[A_ADOPT_GRACE_UNTIL_MS])
  local r = rec[lease]
  if not r or foreign(r, argv[A_ADOPT_HOST], argv[A_ADOPT_UID]) or revoked(r) then return {R_ADOPT_GONE} end
  if r.token > 0 then
    if hold_again(lease, now_ms, ttl) then return {R_ADOPT_HELD, r.token, r.since, r.desc} end
    return {R_ADOPT_GONE}
  end
  return {R_ADOPT_QUEUED}
end

-- Each kind of call a batch holds (batch.lua): its function, the fewest
-- arguments it takes and which one is idle_ms (args.list). Made once, when
-- the library loads; nothing changes it.
local BATCH_KINDS = {
  acquire = {acquire_call, A_ACQUIRE_NEED, A_ACQUIRE_IDLE_MS},
  release = {release_call, A_RELEASE_NEED, A_RELEASE_IDLE_MS},
  renew = {renew_call, A_RENEW_NEED, A_RENEW_IDLE_MS},
  reassert = {reassert_call, A_REASSERT_NEED, A_REASSERT_IDLE_MS},
  adopt = {adopt_call, A_ADOPT_NEED, A_ADOPT_IDLE_MS},
}
