-- One release_call (prelude.lua).
return idle(args('release', ARGV).idle_ms, release_call(ARGV))
