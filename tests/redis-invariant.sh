#!/bin/bash
# 3 agents x 60 concurrent "fleetsem run --slots 3" jobs: never more than 3
# at once, all 180 run, tokens unique and rising in grant order.
. "$(dirname "$0")/lib.sh"

start_redis
for h in a b c; do start_agent "$h"; done

job() {
        fs "$1" run --slots 3 inv -- sh -c '
                echo "enter $FLEETSEM_TOKEN $(date +%s%N)" >>"$0"
                sleep 0.02
                echo "exit $FLEETSEM_TOKEN $(date +%s%N)" >>"$0"' "$T/events"
}
pids=()
for i in $(seq 1 60); do
        for h in a b c; do job "$h" & pids+=($!); done
done
failed=0
for p in "${pids[@]}"; do wait "$p" || failed=$((failed + 1)); done
is "$failed" 0 "all 180 jobs exited 0"

is "$(grep -c '^enter' "$T/events")" 180 "180 jobs entered"
is "$(grep -c '^exit' "$T/events")" 180 "180 jobs exited"

max=$(sort -k3,3n "$T/events" | awk '$1 == "enter" { n++; if (n > max) max = n } $1 == "exit" { n-- } END { print max }')
check "never more than 3 ran at once (max seen: $max)" [ "$max" -le 3 ]
check "the slots were used (max seen: $max)" [ "$max" -ge 2 ]

is "$(awk '$1 == "enter" { print $2 }' "$T/events" | sort -n | uniq | wc -l)" 180 "180 distinct tokens"
# Tokens follow Redis' clock in µs (so they never go back, even after Redis
# loses its data or comes back with old data), one apart when faster.
tokens=$(awk '$1 == "enter" { print $2 }' "$T/events" | sort -n)
is "$(echo "$tokens" | uniq | wc -l)" 180 "180 different tokens"

for h in a b c; do
        sorted=$(grep -o 'Granted slot of inv .*(token [0-9]*)' "$T/agent-$h.log" | grep -o '[0-9]*)$' | tr -d ')')
        check "agent $h granted in rising token order" [ "$sorted" = "$(echo "$sorted" | sort -n)" ]
        is "$(echo "$sorted" | wc -l)" 60 "agent $h granted 60 slots"
done

is "$(holders inv)" 0 "no holder left in Redis"
is "$(waiters inv)" 0 "no waiter left in Redis"
done_testing
