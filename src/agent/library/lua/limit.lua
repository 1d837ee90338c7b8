-- Sets the name's fleet limit (`fleetsem fleet-limit`: root on some
-- host) to `n`, or removes it ('' or '0'). The limit in force is the
-- lowest of it and what holders and waiters asked for; callers that ask
-- for no number (slots 0) need it. Lowering it stops no holder (no new
-- grant until fewer hold); raising or removing it grants the waiters that
-- now fit at once, in line order, as a release does. A name with a fleet
-- limit does not leave Redis when idle. Records itself as the name's last
-- action (field '@').
-- Returns {the record before ("N HOST UID SINCE_MS USER REASON", "" none),
-- lease, token, since, ... granted}.
begin_call(KEYS)
local n = tonumber(ARGV[A_LIMIT_N]) or 0
local now_ms, now_us = now()
fetch({})
state()
local was = st.cap or ''
local reason = ARGV[A_LIMIT_REASON]
local granted, proofs = {}, {}
if n > 0 then
  st.cap = table.concat({digits(n), ARGV[A_LIMIT_HOST], ARGV[A_LIMIT_UID], digits(now_ms), ARGV[A_LIMIT_USER],
    reason}, ' ')
  redis.call('HSET', K_CLOCK, CAP, st.cap)
  persist()
else
  st.cap = false
  redis.call('HDEL', K_CLOCK, CAP)
end
-- Those in line that now fit are granted; the others hear of it (their
-- place may be judged anew, or, without any limit, they are refused).
local grace_until = tonumber(ARGV[A_LIMIT_GRACE_UNTIL_MS]) or 0
expire(now_ms, nil, grace_until)
if st.line > 0 and may_grant(now_ms, grace_until) then
  local judged = grant_next(now_ms, now_us, granted, proofs)
  if #granted > 0 then wake(granted_message(granted, proofs)) end
  if not judged then wake() end
end
redis.call('HSET', K_CLOCK, ACTION, table.concat({'limit', ARGV[A_LIMIT_HOST], ARGV[A_LIMIT_UID], digits(now_ms),
  ARGV[A_LIMIT_USER], (n > 0 and 'set to ' .. digits(n) or 'removed') .. (reason ~= '' and ': ' .. reason or '')},
  ' '))
local reply = {was}
for _, v in ipairs(granted) do reply[#reply + 1] = v end
return idle(ARGV[A_LIMIT_IDLE_MS], reply)
