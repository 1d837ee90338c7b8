-- One adopt_call (prelude.lua).
begin_call(KEYS)
return idle(ARGV[A_ADOPT_IDLE_MS], adopt_call(ARGV))
