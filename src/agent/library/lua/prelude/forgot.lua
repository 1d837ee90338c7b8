-- The prelude, after records.lua: what Redis forgot (a name's keys lost
-- while it stays up).

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
local census_young = false      -- st.forgot is the census' making (census_forgot())
local census_bound_due = false  -- written by this call: its expiry is set in idle() (census_bound())

-- The census expires with its latest entry: by then every name it lists
-- has left Redis (their keys expire at the times it holds), and so has
-- what it cost (a user's fresh names by the thousand). The fleet's clock
-- key, which never expires, keeps that time (its CENSUS_UNTIL, written
-- with the census' expiry: census_bound()), so that a census found
-- missing from then on left with its names: made again as a seeded one
-- (mark -1, no name forgotten); found missing before then, or with no
-- such time known (0: one entry never leaves, or the clock key went too),
-- it was lost, and is made again young. (The clock key's text, which
-- clocks.lua reads whole with this pattern.)
local FLEET_PATTERN = '^(%d+) (%-?%d+) (%d+) (%-?%d+) (%x*) (%d+) (%d+) (%d+)$'
local function census_left(now_ms)
  local _, _, _, _, _, _, _, until_ms = string.match(redis.call('GET', K_FLEET_CLOCK) or '', FLEET_PATTERN)
  until_ms = tonumber(until_ms)
  return until_ms ~= nil and until_ms > 0 and now_ms >= until_ms
end

-- When the name, found without its state, was forgotten (false: it is new).
local function census_forgot()
  local now_ms = now()
  local got = redis.call('ZMSCORE', K_CENSUS, census_member, CENSUS_MARK)
  local expires, made = tonumber(got[1]), tonumber(got[2])
  if not made then
    if census_left(now_ms) then
      census_made = 1
      return false
    end
    census_made = now_ms
    return now_ms
  end
  if expires and expires > now_ms then return now_ms end
  -- (The census' own age: a lease later, the mark of a name made now is
  -- found past, and dropped, by the first caller that knows its lease.
  -- Within that lease the name was forgotten now, not when the census was
  -- made: forgot_left() moves the mark to now, so that the lease of grace
  -- is whole, which is what tells a holder's agent that its slot was
  -- forgotten after its last renewal, not lost before it.)
  census_young = true
  return -made
end

-- A census lost alone is made again by the next call that needs it, and
-- would know none of the names before; one that asks only about the name
-- it lacks a state for (census_forgot()) forgives a name made while it is
-- younger than a lease, but a name's entry is written again only when its
-- keys' expiry moves (idle(): every quarter of idle_ms, hours). So every
-- renewal of a name that has holders or waiters, and every call that
-- grants a slot of it (grant(), reassert.lua's putting back: a name can
-- go a whole lease with no renewal, then be granted, then lose its keys
-- before its holder's first renewal), looks for its entry (census_look,
-- then idle()), and writes it again when it is missing (making the
-- census, with its mark, if it is gone too): each name that has a holder
-- has its entry back before the call that granted it returns, and one
-- that only has waiters by their next renewal, which their agents send
-- within a third of their lease, well inside the lease in which a name
-- the census lacks counts as forgotten. The cost: one ZMSCORE a renewal
-- of a name, and one a call that grants on it (O(log n) in the census'
-- size; none when the call writes the entry anyway; a release that
-- grants nothing pays nothing), a write only after a loss. (now() may
-- read the time here, after the call's idle_due(): that says nothing of
-- the call's own use of it.)
local census_look = false      -- a renewal or a grant: the name's entry is looked for (idle())
local function census_keep()
  local got = redis.call('ZMSCORE', K_CENSUS, census_member, CENSUS_MARK)
  if got[1] then return end
  if not got[2] and not census_made then
    local read = now_read
    census_made, now_read = now(), read
  end
  redis.call('ZADD', K_CENSUS, st.expires > 0 and digits(st.expires) or 'inf', census_member)
  census_bound_due = true
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
  if census_young then
    census_young = false
    if st.forgot + ttl > now_ms then st.forgot, forgot_dirty = now_ms, true end
  end
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

-- A holder's entry is there but its record is gone (an HDEL of its field;
-- not by a script): the name is marked forgotten, as when the whole hash
-- went, so that its agent puts it back (reassert.lua finds the entry
-- without its record, and writes the record again) instead of taking the
-- slot for lost; the entry, and the units the state counts, stay, so
-- nobody is granted it meanwhile.
local function record_lost()
  state()
  st.forgot, forgot_dirty = now(), true
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
