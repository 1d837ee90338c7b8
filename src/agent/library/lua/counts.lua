-- FLAGS: allow-oom (it reads, and drops what ran out: it runs when Redis is full)
-- Returns {now_ms, held, waiting, limit, drain, action, cap}: a name's
-- counts for `fleetsem metrics`, as status.lua says them, read from the
-- name's state alone (the units held, the waiters, the limit in force),
-- never from its records: a constant cost per name, however many hold or
-- wait. The sweep of expired holders and waiters is the other calls'
-- (ZRANGEBYSCORE up to now: nothing to read when none ran out).
begin_call(KEYS)
local now_ms = now()
fetch({})
expire(now_ms, nil, nil, true)
local limit = limit_in_force(0)
-- What the sweep dropped, and the limit in force when it had to be read
-- again from the records (once, not on every metrics run); never a new
-- name's state.
if next(dirty) or (st_dirty and not st_new) then flush() end
return {now_ms, st.held, st.line, limit, st.drain or '', redis.call('HMGET', K_CLOCK, ACTION)[1] or '', st.cap or ''}
