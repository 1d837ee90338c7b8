-- One acquire_call (prelude.lua).
return idle(args('acquire', ARGV).idle_ms, acquire_call(ARGV))
