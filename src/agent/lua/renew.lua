-- One renew_call (prelude.lua): gives all the name's keys their idle time again.
return idle(args('renew', ARGV).idle_ms, renew_call(ARGV), true)
