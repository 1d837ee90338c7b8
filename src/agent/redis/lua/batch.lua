-- KEYS: the keys of each name the batch is on, one name after the other
-- (each name's in keys.list's order), then the fleet's clock and the
-- census. (In a Redis Cluster a script's keys share one hash slot: the
-- agent batches names of one slot only.)
-- ARGV: calls that reached the agent together, each as its kind
-- ("acquire", "release", "renew", "reassert" or "adopt"), its name (i: the i-th name's
-- keys), its number of arguments, then its ARGV. Runs them in order, as
-- that many scripts would, and returns their replies in order; a malformed
-- batch runs none of them.
begin_call(KEYS)
local NAME_KEYS = 4     -- a name's keys (keys.list; begin_name() takes them)
local names = (#KEYS - 2) / NAME_KEYS
if names < 1 or names ~= math.floor(names) then
  return redis.error_reply('batch: malformed keys (' .. #KEYS .. ')')
end
local function whole(s, low, high)
  local n = tonumber(s)
  if n and n == math.floor(n) and n >= low and n <= high then return n end
end
local calls, i = {}, 1
while i <= #ARGV do
  local kind, name, n = BATCH_KINDS[ARGV[i]], whole(ARGV[i + 1], 1, names), whole(ARGV[i + 2], 0, #ARGV)
  if not kind or not name or not n or n < kind[2] or i + 2 + n > #ARGV then
    return redis.error_reply('batch: malformed call at argument ' .. i)
  end
  local argv = {}
  for k = i + 3, i + 2 + n do argv[#argv + 1] = ARGV[k] end
  calls[#calls + 1] = {kind, argv, name}
  i = i + 3 + n
end
-- Each call moves its name's expiry with its own idle time, as it would
-- alone; the writes are the batch's, each name's done (idle()) before the
-- next name's calls, as the end of a call does. The time is the batch's;
-- the fleet's clock is read once, by the first sweep (observe()), and
-- written when due at each name's end, as separate calls would: the next
-- name sees what the one before left (what a GET would find: only this
-- script writes it meanwhile). A name again later (the agent sends
-- each name's calls together, but the script does not rely on it) starts
-- again from what Redis has, as another call would.
local replies, on = {}, 1
for _, c in ipairs(calls) do
  local kind, argv, name = c[1], c[2], c[3]
  if name ~= on then
    idle(nil)
    begin_name(KEYS, NAME_KEYS * (name - 1) + 1)
    on = name
  end
  replies[#replies + 1] = kind[1](argv)
  idle_due(argv[kind[3]])
end
return idle(nil, replies)
