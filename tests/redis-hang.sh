#!/bin/bash
# Redis hangs (SIGSTOP) while a job holds: the agent notices, tells the job
# its slot is lost before Redis could give it to anyone else, refuses new
# requests with a clear error, and recovers on its own when Redis resumes.
TTL=3s
. "$(dirname "$0")/lib.sh"

start_redis
start_agent a
redis_pid=$(cat "$T/redis.pid")

fs_exec a run --slots 1 hang -- sleep 300 &
job=$!
check "the job holds" wait_for 5 sh -c "[ \$(redis-cli -s $T/redis.sock ZCARD 'fleetsem:{hang}:holders') = 1 ]"
expiry=$(rcli ZRANGE 'fleetsem:{hang}:holders' 0 0 WITHSCORES | tail -n 1)

kill -STOP "$redis_pid"
check "the agent notices Redis hangs" wait_for 5 redis_state_is a down
out=$(fs a run --slots 1 --no-wait other -- true 2>&1); rc=$?
is "$rc" 69 "new requests fail with 69 while Redis hangs"
like "$out" 'unreachable: Redis did not answer' "and say why"
is "$(metric a fleetsem_redis_reconnects_total)" 0 "no reconnection yet"
wait "$job"
is "$?" 75 "the job is told its slot is lost, and stopped (exit 75)"
stopped=$(now_ms)
check "before its lease could expire in Redis ($((expiry - stopped)) ms to spare)" [ "$stopped" -lt "$expiry" ]

kill -CONT "$redis_pid"
check "the agent reconnects when Redis resumes" until_metric a fleetsem_redis_reconnects_total 1
is "$(metric a fleetsem_redis_up)" 1 "... and says Redis is up"
fs a run --slots 1 --no-wait other -- true
is "$?" 0 "and serves requests again"
check "nothing is left held" wait_for 5 sh -c "[ \$(redis-cli -s $T/redis.sock ZCARD 'fleetsem:{hang}:holders') = 0 ]"
done_testing
