-- One renew_call (prelude.lua).
return idle(ARGV[A_RENEW_IDLE_MS], renew_call(ARGV))
