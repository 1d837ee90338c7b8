-- FLAGS: allow-oom (it grows nothing: it runs when Redis is full)
-- One renew_call (prelude/calls.lua).
begin_call(KEYS)
return idle(ARGV[A_RENEW_IDLE_MS], renew_call(ARGV))
