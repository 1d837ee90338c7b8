#!/bin/bash
# The first requests to an agent that has not reached Redis yet (a
# socket-activated agent's first client starts it): drain, fleet-limit,
# status and metrics, sent while Redis does not answer yet (stopped with
# SIGSTOP: the connection is made, no reply comes), wait for it and then do
# their work, as run does. The Redis is new (no epoch), so the agent grants
# nothing for a lease: status says how long, but no time of day from a
# Redis clock no name told it.
TTL=15s
. "$(dirname "$0")/lib.sh"

REDIS_SEEDED=1 start_redis
redis_pid=$(cat "$T/redis.pid")
kill -STOP "$redis_pid"
start_agent a

fs a drain d --reason "first use" >"$T/drain.out" 2>&1 & drain=$!
fs a fleet-limit f 3 --reason "first use" >"$T/limit.out" 2>&1 & limit=$!
fs a status >"$T/status.out" 2>&1 & status=$!
fs a metrics >"$T/metrics.out" 2>&1 & metrics=$!

# Connected (root's to its own socket) while Redis says nothing, and read:
# a client that came after them is answered at once (WATCH needs no
# Redis). The agent takes Redis for hung after 5 s (a third of the TTL, at most).
connections() { [ "$(grep -c -- "$NSBASE-a" /proc/net/unix)" -ge "$1" ]; }
check "the four requests reach the agent" wait_for 3 connections 6
like "$(raw a --hold 0.3 WATCH)" '^WATCHING' "a request that needs no Redis is answered meanwhile"
alive=0
for p in $drain $limit $status $metrics; do kill -0 "$p" 2>/dev/null && alive=$((alive + 1)); done
is "$alive" 4 "none of them was answered while Redis did not answer"

kill -CONT "$redis_pid"
wait "$drain"; is "$?" 0 "drain, sent first, succeeds once Redis answers"
check "... d is drained in Redis" test -n "$(rcli HGET 'fleetsem:{d}:clock' '!')"
wait "$limit"; is "$?" 0 "fleet-limit, sent first, succeeds"
is "$(rcli HGET 'fleetsem:{f}:clock' '#' | cut -d' ' -f1)" 3 "... f's fleet limit is 3 in Redis"
wait "$status"; is "$?" 0 "status, sent first, succeeds"
like "$(cat "$T/status.out")" '^Redis: unix:' "... and says which Redis answered"
like "$(cat "$T/status.out")" 'No slot is granted for another [0-9]+s( [0-9]+ms)?: ' \
        "... and how long a new Redis grants nothing"
log_lacks "$T/status.out" '\(until' 'No slot is granted for another' "... without a time of day from an unknown clock"
like "$(fs a status --json)" '"grace":\{"remaining_ms":[0-9]+,"until_ms":null,' \
        "status --json: no until_ms from an unknown clock"
wait "$metrics"; is "$?" 0 "metrics, sent first, succeeds"
like "$(cat "$T/metrics.out")" 'fleetsem_redis_up 1' "... with Redis up"

done_testing
