-- FLAGS: allow-oom (it grows nothing: it runs when Redis is full)
-- One release_call (prelude/calls.lua).
begin_call(KEYS)
return idle(ARGV[A_RELEASE_IDLE_MS], release_call(ARGV))
