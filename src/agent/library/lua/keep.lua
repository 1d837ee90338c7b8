-- FLAGS: allow-oom
-- A batch (batch.lua's KEYS and ARGV) of renewals and releases alone:
-- they grow nothing in Redis, so they run when Redis is full (past its
-- maxmemory: another tenant's keys, say), and its holders keep their
-- slots and give them back; batch.lua, which may grant, does not.
begin_call(KEYS)
return run_batch(KEYS, ARGV, KEEP_KINDS, 'keep')
