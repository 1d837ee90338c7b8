-- ARGV: lease. Gives the slot back (or leaves the queue); returns 1 if it held.
local lease = ARGV[1]
local held = redis.call('ZREM', K_HOLDERS, lease)
local queued = redis.call('ZREM', K_QUEUE, lease)
forget(lease)
-- A place in line also matters: those behind it may now be first.
if held == 1 or queued == 1 then wake() end
return held
