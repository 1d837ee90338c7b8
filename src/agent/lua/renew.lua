-- One renew_call (prelude.lua): gives all the name's keys their idle time again.
return idle(ARGV[3], renew_call(ARGV), true)
