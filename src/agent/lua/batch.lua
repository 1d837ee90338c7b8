-- ARGV: calls on one name that reached the agent together, each as its
-- kind ("acquire", "release", "renew" or "adopt"), its number of arguments, then its
-- ARGV. Runs them in order, as that many scripts would, and returns their
-- replies in order; a malformed batch runs none of them.
-- Each kind: its function, its fewest arguments, which one is idle_ms.
local kinds = {
  acquire = {acquire_call, 8, 8}, release = {release_call, 5, 5}, renew = {renew_call, 4, 3},
  adopt = {adopt_call, 4, 5},
}
local calls, i = {}, 1
while i <= #ARGV do
  local kind, n = kinds[ARGV[i]], tonumber(ARGV[i + 1])
  if not kind or not n or n < kind[2] or i + 1 + n > #ARGV then
    return redis.error_reply('batch: malformed call at argument ' .. i)
  end
  calls[#calls + 1] = {kind, {unpack(ARGV, i + 2, i + 1 + n)}}
  i = i + 2 + n
end
-- The idle time is the calls' own (one agent's: the same in all but
-- adopt's, which asks for none): the longest.
local replies, idle_ms, all = {}, 0, false
for _, c in ipairs(calls) do
  local kind, args = c[1], c[2]
  replies[#replies + 1] = kind[1](args)
  idle_ms = math.max(idle_ms, tonumber(args[kind[3]]) or 0)
  all = all or kind[1] == renew_call
end
return idle(idle_ms, replies, all)
