-- KEYS: the keys of each name the batch is on, one name after the other
-- (each name's in keys.list's order), then the fleet's clock and the
-- census. (In a Redis Cluster a script's keys share one hash slot: the
-- agent batches names of one slot only.)
-- ARGV: calls that reached the agent together, each as its kind
-- ("acquire", "release", "renew", "reassert" or "adopt"), its name (i: the i-th name's
-- keys), its number of arguments, then its ARGV. Runs them in order, as
-- that many scripts would, and returns their replies in order; a malformed
-- batch runs none of them. (The body is run_batch(), prelude/calls.lua: keep.lua
-- runs it too, on renewals and releases alone.)
begin_call(KEYS)
return run_batch(KEYS, ARGV, BATCH_KINDS, 'batch')
