-- Revokes a lease (`fleetsem revoke`: root on some host). A held slot
-- is taken from its holder at once: its record is marked revoked (see
-- revoked()), so that its agent's renewals find it missing, and "r LEASE"
-- on the name's wake channel tells that agent now. Its units stay counted
-- until its agent releases it (once the job stopped) or until its lease
-- runs out, whichever comes first: its expiry (its last renewal + its
-- lease) stays as it is, and the expiry sweep frees it then. Not sooner:
-- a holder whose host does not hear of it (its agent frozen, or cut off
-- from Redis) fences itself at two thirds of the lease and has its job
-- gone by the lease's end, as for any lease that runs out. `now` '1'
-- (a host known dead) frees it at once instead, and hands it to the next in
-- line as a release does, with a higher token. A lease that waits is left alone (its agent would
-- only queue it again) unless `waiters` says: '0' holders only, 'w' waiters
-- only, '1' both (a host known dead: its waiters go first, so that they are
-- not handed the slots its holders had). Records itself as the name's last
-- action (field '@').
-- Returns {1, "HOST UID" of its holder, its token, lease, token, since,
-- ... (each waiter granted)} when a holder was freed at once, {5, "HOST
-- UID", its token, ms until it is free at the latest} when a holder was
-- revoked (or was already), {3, "HOST UID"} when a waiter was, {2, "HOST
-- UID"} when it waits and {4, "HOST UID"} when it holds (and was left),
-- {0} when no such lease holds or waits.
begin_call(KEYS)
local lease = ARGV[A_REVOKE_LEASE]
local at_once = ARGV[A_REVOKE_NOW] == '1'
local now_ms = now()
fetch({lease})
-- Leases already run out are gone, not revoked.
expire(now_ms, nil, ARGV[A_REVOKE_GRACE_UNTIL_MS])
local r = rec[lease]
if not r then return idle(ARGV[A_REVOKE_IDLE_MS], {R_REVOKE_NONE}) end
local owner = r.host .. ' ' .. r.uid
local which = ARGV[A_REVOKE_WAITERS]
if r.token == 0 and which == '0' then return idle(ARGV[A_REVOKE_IDLE_MS], {R_REVOKE_WAITS, owner}) end
if r.token > 0 and which == 'w' then return idle(ARGV[A_REVOKE_IDLE_MS], {R_REVOKE_HOLDS, owner}) end
local token = r.token
local reply
local expiry = token > 0 and tonumber(redis.call('ZSCORE', K_HOLDERS, lease))
if expiry and not at_once and expiry > now_ms then
  -- Held: taken back, counted until released or run out.
  if not revoked(r) then
    r.proof = REVOKED
    put(lease, r)
  end
  reply = {R_REVOKE_FENCED, owner, token, expiry - now_ms}
else
  -- As its owner releases it.
  local released = release_call({[A_RELEASE_LEASE] = lease, [A_RELEASE_HOST] = r.host, [A_RELEASE_UID] = r.uid,
    [A_RELEASE_GRACE_UNTIL_MS] = ARGV[A_REVOKE_GRACE_UNTIL_MS]})
  reply = {token > 0 and R_REVOKE_FREED or R_REVOKE_WAITER, owner}
  if token > 0 then
    if released[1] ~= R_RELEASE_RELEASED then return idle(ARGV[A_REVOKE_IDLE_MS], {R_REVOKE_NONE}) end
    reply[3] = token
    for i = 2, #released do reply[#reply + 1] = released[i] end
  end
end
-- Its agent hears it now, not at its next renewal (a hint: it asks Redis).
if token > 0 then wake('r ' .. lease) end
redis.call('HSET', K_CLOCK, ACTION, table.concat({'revoke', ARGV[A_REVOKE_HOST], ARGV[A_REVOKE_UID], digits(now_ms),
  ARGV[A_REVOKE_USER], ARGV[A_REVOKE_REASON]}, ' '))
return idle(ARGV[A_REVOKE_IDLE_MS], reply)
