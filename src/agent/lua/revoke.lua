-- Revokes a lease (`fleetsem revoke`: root on some host): a held slot is
-- freed at once, whoever holds it, and handed to the next in line as a
-- release hands it, with a higher token; the holder's agent finds the
-- lease missing at its next renewal and acts as on a lost slot. A lease
-- that waits is left alone (its agent would only queue it again) unless
-- `waiters` says: '0' holders only, 'w' waiters only, '1' both (a host
-- known dead: its waiters go first, so that they are not handed the slots
-- its holders had). Records itself as the name's last action (field '@').
-- Returns {1, "HOST UID" of its holder, its token, lease, token, since,
-- ... (each waiter granted)} when a holder was revoked, {3, "HOST UID"}
-- when a waiter was, {2, "HOST UID"} when it waits and {4, "HOST UID"}
-- when it holds (and was left), {0} when no such lease holds or waits.
local lease = ARGV[A_REVOKE_LEASE]
local now_ms = now()
fetch({lease})
-- Leases already run out are gone, not revoked.
expire(now_ms, nil, ARGV[A_REVOKE_GRACE_UNTIL_MS])
local r = rec[lease]
if not r then return idle(ARGV[A_REVOKE_IDLE_MS], {0}) end
local owner = r.host .. ' ' .. r.uid
local which = ARGV[A_REVOKE_WAITERS]
if r.token == 0 and which == '0' then return idle(ARGV[A_REVOKE_IDLE_MS], {2, owner}) end
if r.token > 0 and which == 'w' then return idle(ARGV[A_REVOKE_IDLE_MS], {4, owner}) end
local token = r.token
-- As its owner releases it.
local released = release_call({[A_RELEASE_LEASE] = lease, [A_RELEASE_HOST] = r.host, [A_RELEASE_UID] = r.uid,
  [A_RELEASE_GRACE_UNTIL_MS] = ARGV[A_REVOKE_GRACE_UNTIL_MS]})
local reply = {token > 0 and 1 or 3, owner}
if token > 0 then
  if released[1] ~= 1 then return idle(ARGV[A_REVOKE_IDLE_MS], {0}) end
  reply[3] = token
  for i = 2, #released do reply[#reply + 1] = released[i] end
end
redis.call('HSET', K_CLOCK, ACTION, table.concat({'revoke', ARGV[A_REVOKE_HOST], ARGV[A_REVOKE_UID], digits(now_ms),
  ARGV[A_REVOKE_USER], ARGV[A_REVOKE_REASON]}, ' '))
return idle(ARGV[A_REVOKE_IDLE_MS], reply)
