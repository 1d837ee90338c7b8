-- One adopt_call (prelude.lua).
return idle(ARGV[5], adopt_call(ARGV))
