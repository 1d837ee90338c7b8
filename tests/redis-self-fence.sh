#!/bin/bash
# A holder fences itself: while fleetsem run holds on host a, a's agent is
# stopped (SIGSTOP: no renewals, no LOST, nothing). run hears no RENEWED
# for 2/3 of the lease TTL and stops COMMAND (--on-lost=term) before Redis
# lets the lease run out and grants the slot to a job waiting on host b.
# ROUNDS times (10 by default), with the stop at a different point of a's
# renewal period each time, spread over the whole period. The rule is the
# same for any lease: the shortest (1 s) keeps the rounds short. Then a
# job that traps SIGTERM and runs on: killed before the lease runs out.
TTL=1s
TTL_MS=1000
MARGIN_MS=500           # SIGTERM delivery and the shell's trap, on a busy machine
ROUNDS=${ROUNDS:-10}
. "$(dirname "$0")/lib.sh"

start_redis
start_agent a
start_agent b
agent_a=$(agent_pid a)

for round in $(seq "$ROUNDS"); do
        rm -f "$T/a-start" "$T/a-end" "$T/b-start"
        # A's job notes when it starts and when the fence's SIGTERM reaches it.
        fs_exec a run --slots 1 --on-lost=term sf -- sh -c \
                'date +%s%3N >"$0/a-start"; trap "date +%s%3N >\"$0/a-end\"; exit 143" TERM; sleep 300 & wait' "$T" \
                2>"$T/run-a.log" &
        job_a=$!
        wait_for 10 test -s "$T/a-start" || bail "round $round: the job on a did not start"
        fs_exec b run --slots 1 sf -- sh -c 'date +%s%3N >"$0/b-start"' "$T" &
        job_b=$!
        wait_for 10 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{sf}:queue') = 1 ]" ||
                bail "round $round: the job on b did not queue"
        # Where in a's renewal period (TTL/3) the stop falls: a renewal moves
        # the lease's expiry in Redis; after the next one, each round waits
        # a further (round - 1) / ROUNDS of the period (the fault's timing,
        # not a wait for anything).
        lease=$(rcli ZRANGE 'fleetsem:{sf}:holders' 0 -1)
        expiry=$(rcli ZSCORE 'fleetsem:{sf}:holders' "$lease")
        wait_for 5 sh -c "[ \"\$(redis-cli -s $REDIS_SOCK ZSCORE 'fleetsem:{sf}:holders' '$lease')\" != '$expiry' ]" ||
                bail "round $round: a's lease was not renewed"
        sleep "$(awk -v r="$round" -v n="$ROUNDS" -v p=$((TTL_MS / 3)) 'BEGIN { printf "%.3f", (r - 1) * p / n / 1000 }')"   # not synchronisation: where in the period the fault falls

        stopped=$(now_ms)
        kill -STOP "$agent_a"
        # Bounded: an agent without ttl= leaves the job running for ever.
        wait_for 10 sh -c "! kill -0 $job_a 2>/dev/null" || kill -KILL "$job_a"
        wait "$job_a"
        rc_a=$?
        wait_for 10 test -s "$T/b-start"
        a_end=$(cat "$T/a-end" 2>/dev/null || echo never)
        b_start=$(cat "$T/b-start" 2>/dev/null || echo never)
        kill -CONT "$agent_a"
        wait "$job_b"

        is "$rc_a" 75 "round $round: run on a exits 75 (slot assumed lost)"
        if [ "$a_end" = never ]; then
                not_ok "round $round: COMMAND on a got SIGTERM"
        else
                check "round $round: ... $((a_end - stopped)) ms after the agent stopped (at most $((TTL_MS * 2 / 3)) + $MARGIN_MS)" \
                        [ $((a_end - stopped)) -le $((TTL_MS * 2 / 3 + MARGIN_MS)) ]
        fi
        if [ "$b_start" = never ] || [ "$a_end" = never ]; then
                not_ok "round $round: b's job started after a's was stopped (a: $a_end, b: $b_start)"
        else
                check "round $round: b's job started $((b_start - a_end)) ms after a's was stopped" [ "$b_start" -gt "$a_end" ]
        fi
        wait_for 10 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{sf}:holders') = 0 ]" ||
                bail "round $round: the slot was not freed"
done
like "$(cat "$T/run-a.log")" 'no word from the agent for [0-9ms ]+: assuming the slot of sf is lost \(on-lost=term\)' \
        "run says why it stopped COMMAND"

# A job that traps SIGTERM and runs on: run sends SIGKILL to its process
# group before the lease runs out in Redis (what was left of it when the
# agent last confirmed it), not 10 s after the SIGTERM; d's job starts
# after c's whole group is gone (seen from outside: end_fifo). Two more
# agents, with a lease of 3 s: run keeps the kill 500 ms before the
# lease's end, which a lease of 1 s halves.
LATE_TTL_MS=3000
start_agent c --lease-ttl 3s
start_agent d --lease-ttl 3s
agent_c=$(agent_pid c)
rm -f "$T/b-start" "$T/a-start"
end_fifo "$T/fifo-late" "$T/a-gone"
fs_exec c run --slots 1 --on-lost=term sl -- sh -c \
        'exec 7>"$0/fifo-late"; date +%s%3N >"$0/a-start"; trap "date +%s%3N >\"$0/a-term\"" TERM; while :; do sleep 0.05; done' \
        "$T" 2>"$T/run-late.log" &
job_a=$!
wait_for 10 test -s "$T/a-start" || bail "the late job on c did not start"
fs_exec d run --slots 1 sl -- sh -c 'date +%s%3N >"$0/b-start"' "$T" &
job_b=$!
wait_for 10 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{sl}:queue') = 1 ]" || bail "the job on d did not queue for sl"
kill -STOP "$agent_c"
wait_for 10 sh -c "! kill -0 $job_a 2>/dev/null" || kill -KILL "$job_a"
wait "$job_a"
rc_a=$?
wait_for 10 test -s "$T/b-start"
kill -CONT "$agent_c"
wait "$job_b"
is "$rc_a" 75 "a job that runs on after SIGTERM: run on c exits 75"
a_term=$(cat "$T/a-term" 2>/dev/null || echo 0)
a_gone=$(cat "$T/a-gone" 2>/dev/null || echo 0)
b_start=$(cat "$T/b-start" 2>/dev/null || echo 0)
check "... its job got SIGTERM, and was gone $((a_gone - a_term)) ms later, within the third of a lease left ($((LATE_TTL_MS / 3)) ms)" \
        [ "$a_term" -gt 0 -a "$a_gone" -gt 0 -a $((a_gone - a_term)) -lt $((LATE_TTL_MS / 3)) ]
check "d's job started $((b_start - a_gone)) ms after c's whole job was gone" \
        [ "$a_gone" -gt 0 -a "$b_start" -ge "$a_gone" ]
like "$(cat "$T/run-late.log")" 'COMMAND still running [0-9.ms ]+ after SIGTERM; sending SIGKILL \(before its slot may be granted elsewhere\)' \
        "run says why it sent SIGKILL"
done_testing
