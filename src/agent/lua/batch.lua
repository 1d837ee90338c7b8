-- ARGV: calls on one name that reached the agent together, each as its
-- kind ("acquire", "release", "renew" or "adopt"), its number of arguments, then its
-- ARGV. Runs them in order, as that many scripts would, and returns their
-- replies in order; a malformed batch runs none of them.
begin_call(KEYS)
-- Each kind: its function, the fewest arguments it takes and which one is
-- idle_ms (args.list).
local kinds = {
  acquire = {acquire_call, A_ACQUIRE_NEED, A_ACQUIRE_IDLE_MS},
  release = {release_call, A_RELEASE_NEED, A_RELEASE_IDLE_MS},
  renew = {renew_call, A_RENEW_NEED, A_RENEW_IDLE_MS},
  adopt = {adopt_call, A_ADOPT_NEED, A_ADOPT_IDLE_MS},
}
local calls, i = {}, 1
while i <= #ARGV do
  local kind, n = kinds[ARGV[i]], tonumber(ARGV[i + 1])
  if not kind or not n or n < kind[2] or i + 1 + n > #ARGV then
    return redis.error_reply('batch: malformed call at argument ' .. i)
  end
  local argv = {}
  for k = i + 2, i + 1 + n do argv[#argv + 1] = ARGV[k] end
  calls[#calls + 1] = {kind, argv}
  i = i + 2 + n
end
-- Each call moves the name's expiry with its own idle time, as it would
-- alone; the writes are the batch's.
local replies = {}
for _, c in ipairs(calls) do
  local kind, argv = c[1], c[2]
  replies[#replies + 1] = kind[1](argv)
  idle_due(argv[kind[3]])
end
return idle(nil, replies)
