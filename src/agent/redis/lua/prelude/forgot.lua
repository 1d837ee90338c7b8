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
