-- Drains the name (on "1": no new grant anywhere; holders run on, waiters
-- keep their places, a caller that does not wait is told why) or lets it
-- grant again (on "0": the waiters that fit are granted at once, in line
-- order, and told as a release tells them). Only agents call it, for root
-- on their host. A drained name does not leave Redis when idle. A call
-- that drains, or undrains a drained name, records itself as its last
-- action (field '@').
-- Returns {changed (1: it was the other way, 0: as asked already), the
-- drain record before ("" none), lease, token, since, ... granted}.
begin_call(KEYS)
local on = ARGV[A_DRAIN_ON] == '1'
local now_ms, now_us = now()
fetch({})
state()
local was = st.drain or ''
local granted, proofs = {}, {}
if on then
  st.drain = table.concat({ARGV[A_DRAIN_HOST], ARGV[A_DRAIN_UID], digits(now_ms), ARGV[A_DRAIN_USER],
    ARGV[A_DRAIN_REASON]}, ' ')
  drain_dirty = true
  persist()
  -- Those in line look again, and hear of it.
  if st.line > 0 and was == '' then wake() end
elseif st.drain then
  st.drain, drain_dirty = false, true
  local grace_until = tonumber(ARGV[A_DRAIN_GRACE_UNTIL_MS]) or 0
  expire(now_ms, nil, grace_until)
  if may_grant(now_ms, grace_until) then
    local judged = grant_next(now_ms, now_us, granted, proofs)
    if #granted > 0 then wake(granted_message(granted, proofs)) end
    if not judged then wake() end
  end
end
local changed = (was ~= '') ~= on
if on or changed then
  redis.call('HSET', K_CLOCK, ACTION, table.concat({on and 'drain' or 'undrain', ARGV[A_DRAIN_HOST], ARGV[A_DRAIN_UID],
    digits(now_ms), ARGV[A_DRAIN_USER], ARGV[A_DRAIN_REASON]}, ' '))
end
local reply = {changed and R_DRAIN_CHANGED or R_DRAIN_UNCHANGED, was}
for _, v in ipairs(granted) do reply[#reply + 1] = v end
return idle(ARGV[A_DRAIN_IDLE_MS], reply)
