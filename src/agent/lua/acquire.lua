-- One acquire_call (prelude.lua).
return idle(ARGV[8], acquire_call(ARGV))
