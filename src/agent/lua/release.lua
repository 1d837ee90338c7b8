-- One release_call (prelude.lua).
return idle(ARGV[5], release_call(ARGV))
