-- One acquire_call (prelude.lua).
return idle(ARGV[A_ACQUIRE_IDLE_MS], acquire_call(ARGV))
