-- The prelude, shared by every script: the library's top level, in the
-- files of prelude/ that embed-lua.py puts together in the order of its
-- PRELUDE_FILES. This one comes after args.lua (the check of every call):
-- the records and the name's state. The K_ locals above them come from
-- keys.list.
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
--   "HELD LINE LIMIT AT_LIMIT TOKEN TICKET TTL_MS OFFSET_MS EXPIRES_MS CLOCK_ID":
-- how many hold and how many are in line (the sizes of holders and queue,
-- kept with every change to those, so that no call has to count them),
-- the limit in force and how many of them asked for exactly it (LIMIT -1:
-- not known since the last of those left; read again from the records
-- when asked), the last fencing token and ticket handed out, the lease of
-- the last caller that knew one, the fleet clock's offset the expiries are
-- on (see observe()), when the name's keys leave Redis (0: never), and
-- which fleet clock key that offset is of (its ID: a key lost and made
-- again is another clock, whose offsets say nothing of this one's).
-- Field '!', while the name is drained (no new grant: drain.lua), says by
-- whom and why: "HOST UID SINCE_MS USER REASON". Field '#', while the
-- name has a fleet limit (limit.lua), says it, who set it and why:
-- "N HOST UID SINCE_MS USER REASON". Field '@' is the last
-- operator action that changed the name, "ACTION HOST UID AT_MS USER
-- REASON" (drain.lua, revoke.lua, limit.lua), for status; no other script
-- reads it.
-- Every other field is a lease that holds or waits, with its record
--   "HOST UID SLOTS TOKEN SINCE_MS PROOF [*WEIGHT ][+host ]DESCRIPTION"
-- (SLOTS 0: it asked for no limit of its own, the fleet limit's caller;
-- WEIGHT, when above 1, the units of the limit it takes: HELD counts
-- units, not holders; "+host" when the host holds the slot itself, the
-- argument hold of acquire and reassert (r.hold); DESCRIPTION is text for
-- people, which no script reads)
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
  desc = rest or desc
  local held_by_host = string.match(desc, '^%+host (.*)$')
  return {host = host, uid = uid, slots = tonumber(slots), token = tonumber(token), since = tonumber(since),
    proof = proof, weight = tonumber(weight) or 1, hold = held_by_host ~= nil, desc = held_by_host or desc}
end
-- A record's host, token and proof (what a renewal checks), from its text:
-- it matches exactly the texts parse_record() accepts.
local RECORD_HEAD = '^(%S+) %d+ %d+ (%d+) %d+ (%S+) '
-- (One string.format each, not a digits() a number and a table.concat:
-- the same text, at half the Lua; a grant writes a record and two states.)
local function record_text(r)
  local desc = r.hold and '+host ' .. r.desc or r.desc
  if r.weight > 1 then
    return string.format('%s %s %.0f %.0f %.0f %s *%.0f %s', r.host, r.uid, r.slots, r.token, r.since, r.proof,
      r.weight, desc)
  end
  return string.format('%s %s %.0f %.0f %.0f %s %s', r.host, r.uid, r.slots, r.token, r.since, r.proof, desc)
end
-- A holder taken back by `fleetsem revoke` (revoke.lua) keeps its record,
-- PROOF 'revoked', and its units in HELD until its agent releases it or
-- its expiry, moved to when it must have fenced itself, runs out: no
-- renewal, acquire or adoption holds it again.
local REVOKED = 'revoked'
local function revoked(r)
  return r.token > 0 and r.proof == REVOKED
end
-- The state's numbers (the words that are numbers), ten of them (nine in
-- a state written before CLOCK_ID: 0, the fleet clock key's id then), or
-- no state (nil). (Ten words that are all numbers, as state_text() writes
-- them, in one match: a grant parses the state twice; anything else word
-- by word.)
local STATE_PATTERN = '^%s*(%S+)%s+(%S+)%s+(%S+)%s+(%S+)%s+(%S+)%s+(%S+)%s+(%S+)%s+(%S+)%s+(%S+)%s+(%S+)%s*$'
local function parse_state(v)
  local held, line, limit, at_limit, token, ticket, ttl, offset, expires, clock = string.match(v or '', STATE_PATTERN)
  held, line, limit, at_limit, token = tonumber(held), tonumber(line), tonumber(limit), tonumber(at_limit), tonumber(token)
  ticket, ttl, offset, expires, clock = tonumber(ticket), tonumber(ttl), tonumber(offset), tonumber(expires), tonumber(clock)
  if held and line and limit and at_limit and token and ticket and ttl and offset and expires and clock then
    return {held = held, line = line, limit = limit, at_limit = at_limit, token = token, ticket = ticket, ttl = ttl,
      offset = offset, expires = expires, clock = clock}
  end
  local n = {}
  for f in string.gmatch(v or '', '%S+') do n[#n + 1] = tonumber(f) end
  if #n ~= 9 and #n ~= 10 then return nil end
  return {held = n[1], line = n[2], limit = n[3], at_limit = n[4], token = n[5], ticket = n[6], ttl = n[7],
    offset = n[8], expires = n[9], clock = n[10] or 0}
end
local function state_text(s)
  return string.format('%.0f %.0f %.0f %.0f %.0f %.0f %.0f %.0f %.0f %.0f', s.held, s.line, s.limit, s.at_limit,
    s.token or 0, s.ticket, s.ttl or 0, s.offset or 0, s.expires, s.clock or 0)
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

-- The fleet limit (`fleetsem fleet-limit`), or nil.
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

-- A new holder or waiter's record, counted in the limit in force (hold:
-- a slot the host holds itself).
local function newcomer(lease, slots, host, uid, desc, weight, hold)
  local r = {host = host, uid = uid, slots = slots, token = 0, since = 0, proof = '-', weight = weight or 1,
    hold = hold or false, desc = desc}
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

