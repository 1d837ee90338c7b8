-- One acquire_call (prelude/calls.lua).
begin_call(KEYS)
return idle(ARGV[A_ACQUIRE_IDLE_MS], acquire_call(ARGV))
