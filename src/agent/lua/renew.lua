-- One renew_call (prelude.lua): gives all the name's keys their idle time again.
return idle(ARGV[A_RENEW_IDLE_MS], renew_call(ARGV), true)
