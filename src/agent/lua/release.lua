-- ARGV: lease. Gives the slot back (or leaves the queue) and hands what
-- that frees to the next in line. Returns {held, lease, token, since, ...}:
-- 1 if it held, then each waiter granted a slot.
local lease = ARGV[1]
local now = now_ms()
expire(now)
local held = redis.call('ZREM', K_HOLDERS, lease)
local queued = redis.call('ZREM', K_QUEUE, lease)
forget(lease)
local granted = {}
-- A place in line also matters: those behind it may now be first.
if held == 1 or queued == 1 then
  local judged = grant_next(now, granted)
  if #granted > 0 then
    wake('g ' .. table.concat(granted, ' '))
  end
  if not judged or (#granted == 0 and queued == 1) then wake() end
end
local reply = {held}
for _, v in ipairs(granted) do reply[#reply + 1] = v end
return reply
