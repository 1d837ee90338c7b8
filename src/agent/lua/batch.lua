-- ARGV: calls on one name that reached the agent together, each as its
-- kind ("acquire", "release", "renew" or "adopt"), its number of arguments, then its
-- ARGV. Runs them in order, as that many scripts would, and returns their
-- replies in order; a malformed batch runs none of them.
-- Each kind's function (its arguments: args.list).
local kinds = {acquire = acquire_call, release = release_call, renew = renew_call, adopt = adopt_call}
local calls, i = {}, 1
while i <= #ARGV do
  local name, n = ARGV[i], tonumber(ARGV[i + 1])
  if not kinds[name] or not n or n < ARGS[name].need or i + 1 + n > #ARGV then
    return redis.error_reply('batch: malformed call at argument ' .. i)
  end
  local argv = {}
  for k = i + 2, i + 1 + n do argv[#argv + 1] = ARGV[k] end
  calls[#calls + 1] = {name, argv}
  i = i + 2 + n
end
-- The idle time is the calls' own (one agent's: the same in all but
-- adopt's, which asks for none): the longest.
local replies, idle_ms, all = {}, 0, false
for _, c in ipairs(calls) do
  local name, argv = c[1], c[2]
  replies[#replies + 1] = kinds[name](argv)
  idle_ms = math.max(idle_ms, tonumber(args(name, argv).idle_ms) or 0)
  all = all or name == 'renew'
end
return idle(idle_ms, replies, all)
