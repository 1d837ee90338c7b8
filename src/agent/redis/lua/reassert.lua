-- One reassert_call (prelude.lua).
begin_call(KEYS)
return idle(ARGV[A_REASSERT_IDLE_MS], reassert_call(ARGV))
