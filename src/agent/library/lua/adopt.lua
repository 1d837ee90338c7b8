-- One adopt_call (prelude/calls.lua).
begin_call(KEYS)
return idle(ARGV[A_ADOPT_IDLE_MS], adopt_call(ARGV))
