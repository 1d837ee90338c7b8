-- One release_call (prelude.lua).
return idle(ARGV[A_RELEASE_IDLE_MS], release_call(ARGV))
