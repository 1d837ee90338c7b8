-- Revokes a held lease (`fleetsem revoke`: root on some host): its slot is
-- freed at once, whoever holds it, and handed to the next in line as a
-- release hands it, with a higher token; the holder's agent finds the
-- lease missing at its next renewal and acts as on a lost slot. A lease
-- that waits is left alone (its agent would only queue it again). Records
-- itself as the name's last action (field '@').
-- Returns {1, "HOST UID" of its holder, its token, lease, token, since,
-- ... (each waiter granted)} when revoked, {2, "HOST UID"} when it waits,
-- {0} when no such lease holds or waits.
local lease = ARGV[A_REVOKE_LEASE]
fetch({lease})
local r = rec[lease]
if not r then return idle(ARGV[A_REVOKE_IDLE_MS], {0}) end
local owner = r.host .. ' ' .. r.uid
if r.token == 0 then return idle(ARGV[A_REVOKE_IDLE_MS], {2, owner}) end
local token = r.token
-- As its owner releases it.
local released = release_call({[A_RELEASE_LEASE] = lease, [A_RELEASE_HOST] = r.host, [A_RELEASE_UID] = r.uid,
  [A_RELEASE_GRACE_UNTIL_MS] = ARGV[A_REVOKE_GRACE_UNTIL_MS]})
local reply = {1, owner, token}
for i = 2, #released do reply[#reply + 1] = released[i] end
local now_ms = now()
redis.call('HSET', K_CLOCK, ACTION, table.concat({'revoke', ARGV[A_REVOKE_HOST], ARGV[A_REVOKE_UID], digits(now_ms),
  ARGV[A_REVOKE_USER], ARGV[A_REVOKE_REASON]}, ' '))
return idle(ARGV[A_REVOKE_IDLE_MS], reply)
