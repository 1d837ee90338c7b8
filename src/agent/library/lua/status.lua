-- FLAGS: allow-oom (it reads, and drops what ran out: it runs when Redis is full)
-- Returns {now_ms, {{lease, expires_in_ms, "TOKEN SINCE", description, "HOST UID", weight}...},
--          {{lease, description, "HOST UID", weight}...}, limit, drain, action, cap,
--          held, holders, waiting}: the first STATUS_PAGE holders (in
-- expiry order) and waiters (in ticket order) with their records, so
-- that a name held on thousands of hosts costs a bounded call; limit 0
-- when nobody holds or waits, drain the drain record ("HOST UID SINCE_MS
-- USER REASON"; "" when not drained), action the last operator action
-- ("ACTION HOST UID AT_MS USER REASON"; "" when none), cap the fleet
-- limit's record ("N HOST UID SINCE_MS USER REASON"; "" when none); then
-- the totals: the units held, the holders and the waiters, counted from
-- the state (all of them, not only the page).
begin_call(KEYS)
local STATUS_PAGE = 100
local now_ms = now()
fetch({})
expire(now_ms, nil, nil, true)
local h = redis.call('ZRANGE', K_HOLDERS, 0, STATUS_PAGE - 1, 'WITHSCORES')
local q = redis.call('ZRANGE', K_QUEUE, 0, STATUS_PAGE - 1)
local n_holders = #h / 2
if n_holders >= STATUS_PAGE then n_holders = redis.call('ZCARD', K_HOLDERS) end
local leases = {}
for i = 1, #h, 2 do leases[#leases + 1] = h[i] end
for _, lease in ipairs(q) do leases[#leases + 1] = lease end
fetch(leases)
local holders, queue = {}, {}
for i = 1, #h, 2 do
  local r = rec[h[i]]
  holders[#holders + 1] = {h[i], math.max(0, tonumber(h[i + 1]) - now_ms),
    r and digits(r.token) .. ' ' .. digits(r.since) or '', r and r.desc or '', r and r.host .. ' ' .. r.uid or '',
    r and r.weight or 1}
end
for _, lease in ipairs(q) do
  local r = rec[lease]
  queue[#queue + 1] = {lease, r and r.desc or '', r and r.host .. ' ' .. r.uid or '', r and r.weight or 1}
end
local limit = limit_in_force(0)
-- What the sweep dropped (never a new name's state).
if next(dirty) then flush() end
-- (HMGET, not HGET: the commands the agents' Redis user has stay as they were.)
return {now_ms, holders, queue, limit, st.drain or '', redis.call('HMGET', K_CLOCK, ACTION)[1] or '', st.cap or '',
  st.held, n_holders, st.line}
