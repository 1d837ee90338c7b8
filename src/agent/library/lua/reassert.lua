-- One reassert_call (prelude/calls.lua).
begin_call(KEYS)
return idle(ARGV[A_REASSERT_IDLE_MS], reassert_call(ARGV))
