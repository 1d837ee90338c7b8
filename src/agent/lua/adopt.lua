-- One adopt_call (prelude.lua).
return idle(args('adopt', ARGV).idle_ms, adopt_call(ARGV))
