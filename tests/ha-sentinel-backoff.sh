#!/bin/bash
# The master's connection lost, and the Sentinels' round that ends just
# after it naming no master: the agent's backoff grows twice within a few
# milliseconds (120 here). Its next question, when the first backoff ends
# (within the 250 ms sd-event may add), is answered at once, inside the
# second backoff, most times (a round here, four rounds in all); the
# agent must still connect when that backoff ends, and not
# wait for good for a reconnect nobody armed (the 30-minute fault run found
# an agent so, asking its Sentinels every second, all three agreeing, and
# never connecting). The Sentinel here is the test's own, with quorum 1:
# it springs the trap on the question it is asked once a file exists.
. "$(dirname "$0")/lib.sh"

M=$(free_port)
mkdir -p "$T/m"
"$REDIS_SERVER" --port "$M" --bind 127.0.0.1 --dir "$T/m" --save '' --appendonly no --pidfile "$T/m/pid" \
        --daemonize yes --logfile "$T/m/log" >/dev/null || bail "redis-server did not start"
wait_for 10 redis-cli -p "$M" ping || bail "redis-server does not answer"
S=$(free_port)
python3 "$(dirname "$0")/fake-sentinel.py" "$S" fsm 127.0.0.1 "$M" --trap "$T/trap" >"$T/sentinel.out" 2>&1 &
SENTINEL=$!
wait_for 30 grep -q listening "$T/sentinel.out" || bail "the test's Sentinel did not start"

TTL=6s run_agent a --redis "sentinel://127.0.0.1:$S/fsm"
fs a run --wait 10s --slots 1 job -- true
is "$?" 0 "through the Sentinel, a job gets a slot"
is "$(grep -c 'Connected to Redis master' "$T/agent-a.log")" 1 "... the agent connected once"

for round in 1 2 3 4; do
        touch "$T/trap"
        check "round $round: the Sentinel springs the trap at the agent's next question" \
                wait_for 5 sh -c "[ \$(grep -c '^trapped' '$T/sentinel.out') -ge $round ]"
        check "... the agent lost the master, and that round named none" \
                wait_for 5 sh -c "[ \$(grep -c 'no quorum names the master of fsm' '$T/agent-a.log') -ge $round ]"
        check "... and connects again when its backoff ends" \
                wait_for 5 sh -c "[ \$(grep -c 'Connected to Redis master' '$T/agent-a.log') -ge $((round + 1)) ]"
        fs a run --wait 10s --slots 1 job -- true
        is "$?" 0 "... a job gets a slot again"
done

kill "$SENTINEL"
wait "$SENTINEL" 2>/dev/null
redis-cli -p "$M" shutdown nosave >/dev/null 2>&1
done_testing
