-- ARGV: lease, host, uid, grace_until_ms, idle_ms. Gives the slot back (or
-- leaves the queue) and hands what that frees to the next in line.
-- Returns {-1} when the lease is another host's or user's, else
-- {held, lease, token, since, ...}: 1 if it held, then each waiter granted.
local lease, me = ARGV[1], ARGV[2] .. ' ' .. ARGV[3]
local grace_until, idle_ms = tonumber(ARGV[4]) or 0, ARGV[5]
local now_ms, now_us = now()
expire(now_ms)

if foreign(lease, me) then return idle(idle_ms, {-1}) end

local held = redis.call('ZREM', K_HOLDERS, lease)
local queued = 0
if held == 0 then queued = redis.call('ZREM', K_QUEUE, lease) end
forget(lease, held == 1)
local granted = {}
-- A place in line also matters: those behind it may now be first. During
-- the grace period after a reset the slot stays free.
if held == 1 or queued == 1 then
  local judged = true
  if now_ms >= grace_until then judged = grant_next(now_ms, now_us, granted) end
  if #granted > 0 then wake(granted_message(granted)) end
  -- Those behind a lease that left the line have a new place.
  if not judged or queued == 1 then wake() end
end
local reply = {held}
for _, v in ipairs(granted) do reply[#reply + 1] = v end
return idle(idle_ms, reply)
