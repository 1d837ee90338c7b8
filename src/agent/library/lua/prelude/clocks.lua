-- The prelude, after forgot.lua: the fleet's clock, the fencing tokens
-- and the steps of Redis' clock.

-- The fleet's clock key, K_FLEET_CLOCK (the last KEY, one for all names):
-- "LAST_MS OFFSET_MS ERA TOKEN_OFFSET_MS RUN_ID SHORT_MS ID CENSUS_UNTIL".
-- observe() reads it and says what the first three, SHORT_MS and ID are;
-- next_token() the next two; CENSUS_UNTIL is when the census expires (0:
-- never, or not known; census_bound()). fleet_write()
-- writes back what `fleet` holds; `fleet_due`: at the end of the call.
local fleet, fleet_due = {}, false
-- Read once a call: a batch's names share it (batch.lua). Nothing but this
-- script writes the key while it runs, and what it writes is `fleet`, so
-- a later name's GET would find what `fleet` holds already.
local fleet_known = false
local function field(w, pattern, default)
  return tonumber(w and string.match(w, pattern)) or default
end
-- (The key as fleet_write() writes it, eight words, in one match;
-- anything else word by word, each word checked alone: a key of five,
-- without SHORT_MS, has 0 for it, none known; one of six, without ID, is
-- clock 0, the id of the names' offsets written before there was one;
-- one of seven, without CENSUS_UNTIL, knows no time the census expires.)
local function fleet_read()
  local text = redis.call('GET', K_FLEET_CLOCK) or ''
  local last, offset, era, token_offset, id, short, clock, census_until = string.match(text, FLEET_PATTERN)
  if last then
    fleet.last, fleet.era, fleet.offset, fleet.token_offset = tonumber(last), tonumber(era), tonumber(offset),
      tonumber(token_offset)
    fleet.run_id, fleet.short, fleet.id, fleet.census_until = id, tonumber(short), tonumber(clock),
      tonumber(census_until)
    return
  end
  local w = {}
  for f in string.gmatch(text, '%S+') do w[#w + 1] = f end
  fleet.last, fleet.era = field(w[1], '^%d+$', nil), field(w[3], '^%d+$', 0)
  fleet.offset, fleet.token_offset = field(w[2], '^%-?%d+$', 0), field(w[4], '^%-?%d+$', 0)
  fleet.run_id = w[5] and string.match(w[5], '^%x+$') or ''
  fleet.short = field(w[6], '^%d+$', 0)
  fleet.id = field(w[7], '^%d+$', 0)
  fleet.census_until = 0
end
local function fleet_write()
  redis.call('SET', K_FLEET_CLOCK, table.concat({digits(fleet.last), digits(fleet.offset), digits(fleet.era),
    digits(fleet.token_offset), fleet.run_id, digits(fleet.short or 0), digits(fleet.id),
    digits(fleet.census_until or 0)}, ' '))
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
-- process (TOKEN_OFFSET_MS, what of it is above 0): tokens handed out
-- while the clock was stepped forward are not ahead of real time, and a
-- counter restored from before them starts again above them once the
-- clock is put right. TOKEN_OFFSET_MS itself keeps the steps back too, so
-- that a step back and the step that puts the clock right again take out
-- nothing between them: kept at 0, the step back was forgotten and the
-- step forward after it taken out whole, and a counter lost after it
-- started again below the tokens handed out before the step back (chaos
-- finding 21). It is never ahead of the server's clock, and it is the server's
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
    fleet.token_offset = fleet.token_offset + by
  end
  fleet.run_id = id
end
local function token_clock(now_us)
  local now_ms = now()
  if not fleet.last or now_ms >= fleet.last + TOKEN_GRAIN_MS or now_ms < fleet.last then
    fleet.last, fleet_due = now_ms, true
  end
  return math.max(1, now_us - math.max(0, fleet.token_offset) * 1000)
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
-- Leases differ (a slot a host holds itself has host_lease, agents may
-- have other lease_ttls), and the shortest lease among the callers is
-- what a gap must be judged by: SHORT_MS, the shortest caller's lease
-- since the key's last gap (0: none known). A longer lease's caller that
-- judged by its own would take for time a step that ends the shorter
-- leases (a renewal of a host-held slot, with host_lease, called first
-- after the step). A gap that only the shorter lease makes a step is
-- counted once and the shorter lease forgotten, its callers may be gone
-- (every agent that holds one calls again within a third of it, and
-- puts it back): so a fleet whose short leases ended counts one gap in
-- the longer callers' calls as a step, as a gap in every agent's calls.
--
-- The key lost alone (a DEL, eviction) is a reset of what it vouches for,
-- never offset 0 of the clock it was: its offset may be far from 0 (every
-- step and every silence of the fleet added to it), and a name's expiries
-- moved by it back to 0 would all end at once, granting each slot twice.
-- A key found missing (or without a LAST_MS one can read) is a new clock
-- with a new ID (the server's time in µs when it is made), its offset 0
-- and no last call known (so no step is seen in the call that makes it);
-- each name's state says the ID of the clock its OFFSET_MS is of. A name
-- whose ID is not the key's has its offset on a clock that is gone: its
-- expiries are on that clock as it was when the key was lost, which the
-- new one starts from, so they move by the new clock's offset only (the
-- steps seen since it was made), never by the old one's. A gap in every
-- agent's calls, or a step, between the name's last call and the new
-- key's making went unseen: so its holders and waiters that would run
-- out within a lease are given a lease from now (its last caller's) —
-- later is safe, earlier is not: a holder alive is put back by its next
-- renewal, one that is gone holds its slot one lease longer. The tokens'
-- clock of a new key is the server's (TOKEN_OFFSET_MS 0, the most it can
-- be: what of the offset is below 0 is never taken out), so no token goes back; the era and
-- the shortest lease start again, as after a restart.
-- Adds nothing, but moves every entry of the ZSET `key` that runs out
-- before `floor` to `floor`.
local function raise(key, floor)
  local low = redis.call('ZRANGEBYSCORE', key, '-inf', '(' .. digits(floor))
  local args = {}
  for _, lease in ipairs(low) do
    args[#args + 1] = floor
    args[#args + 1] = lease
  end
  each_chunk('ZADD', key, args)
end
local function observe(now_ms, ttl, grace_until, looker)
  local offset, last_ttl = st.offset, st.ttl
  ttl = tonumber(ttl) or last_ttl or 0
  -- (Once a call: see fleet_known.)
  if not fleet_known and not fleet_due then fleet_read() end
  fleet_known = true
  -- (A new clock, until this call writes it.)
  if not fleet.last then
    local _, now_us = now()
    fleet.id, fleet.offset = now_us, 0
  end
  -- This name's offset is of a clock that is gone: the new one's start.
  local lost = offset and st.clock ~= fleet.id
  if lost then offset = 0 end
  local fleet_last, fleet_offset, short = fleet.last, fleet.offset, fleet.short or 0
  grace_until = tonumber(grace_until) or 0
  local stale = fleet_last and grace_until > fleet.era
  local judge = (short > 0 and short < ttl and not stale) and short or ttl
  local stepped = fleet_last and not stale and ((ttl > 0 and now_ms - fleet_last > judge / 2) or now_ms < fleet_last)
  if stepped then fleet_offset = fleet_offset + now_ms - fleet_last end
  local moved = offset and offset ~= fleet_offset
  if looker then return not (stepped or moved or lost) end
  -- Written again after a twentieth of the caller's lease at most, not
  -- every call (a shorter lease's callers write at their own pace), and
  -- when the caller's lease is shorter than SHORT_MS; never by a caller
  -- that knows no lease (it would swallow a step).
  local id = (stale or stepped or not fleet_last or
    (ttl > 0 and (now_ms - fleet_last >= ttl / 20 or short == 0 or ttl < short))) and run_id()
  if id then
    token_offset_move(id, stepped and now_ms - fleet_last - (now_ms > fleet_last and TOKEN_GRAIN_MS or 1) or 0, stale)
  end
  if moved then
    if st.held > 0 then shift(K_HOLDERS, fleet_offset - offset) end
    if st.line > 0 then shift(K_WAITERS, fleet_offset - offset) end
  end
  if lost then
    local floor = now_ms + ((last_ttl or 0) > 0 and last_ttl or ttl)
    if st.held > 0 then raise(K_HOLDERS, floor) end
    if st.line > 0 then raise(K_WAITERS, floor) end
  end
  if id then
    -- (Forgotten: in another state, or after a gap only it made a step.)
    if stale or not fleet_last or short == 0 or (stepped and now_ms - fleet_last <= ttl / 2 and now_ms > fleet_last) then
      short = ttl
    elseif ttl > 0 then
      short = math.min(short, ttl)
    end
    fleet.last, fleet.offset, fleet.era, fleet.short = now_ms, fleet_offset, math.max(fleet.era, grace_until), short
    fleet_write()
  end
  if lost or offset ~= fleet_offset or st.clock ~= fleet.id or (ttl > 0 and ttl ~= last_ttl) then
    st.offset, st.ttl, st.clock, st_dirty = fleet_offset, ttl, fleet.id, true
  end
  return true
end
