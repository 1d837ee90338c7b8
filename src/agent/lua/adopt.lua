-- One adopt_call (prelude.lua).
return idle(ARGV[A_ADOPT_IDLE_MS], adopt_call(ARGV))
