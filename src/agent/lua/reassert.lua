-- After Redis came back without this holder (restarted without its data, or
-- a failover lost it): puts it back if a slot is free, also during the grace
-- period. Returns 1 if it holds, 0 if lost, -1 if the lease is another
-- host's or user's, or revoked.
begin_call(KEYS)
local lease, slots = ARGV[A_REASSERT_LEASE], tonumber(ARGV[A_REASSERT_SLOTS])
local token, since = tonumber(ARGV[A_REASSERT_TOKEN]), tonumber(ARGV[A_REASSERT_SINCE_MS])
local ttl, desc = tonumber(ARGV[A_REASSERT_TTL_MS]), ARGV[A_REASSERT_DESCRIPTION]
local host, uid, idle_ms = ARGV[A_REASSERT_HOST], ARGV[A_REASSERT_UID], ARGV[A_REASSERT_IDLE_MS]
local weight = tonumber(ARGV[A_REASSERT_WEIGHT]) or 1
local now_ms, now_us = now()
fetch({lease})
-- Only after a reset, of which grace_until tells: what Redis has from
-- before it is old data, not a clock step.
expire(now_ms, ttl, ARGV[A_REASSERT_GRACE_UNTIL_MS])

local r = rec[lease]
if r and (foreign(r, host, uid) or revoked(r)) then return idle(idle_ms, R_REASSERT_REFUSED) end
if r and r.token > 0 then
  if redis.call('ZSCORE', K_HOLDERS, lease) then
    redis.call('ZADD', K_HOLDERS, now_ms + ttl, lease)
    return idle(idle_ms, R_REASSERT_HELD)
  end
  entry_lost(lease)
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
  return idle(idle_ms, R_REASSERT_HELD)
end
-- (A holder that asked for no number, when the fleet limit went with the
-- data too, is put back: all such holders held within the limit then,
-- and nobody is granted anything without one.)
local limit = limit_in_force(slots)
if slots > 0 then limit = math.min(slots, limit) end
if limit and limit > 0 and st.held + weight > limit then
  return idle(idle_ms, R_REASSERT_LOST)
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
return idle(idle_ms, R_REASSERT_HELD)
