#!/bin/bash
# Redis killed and restarted without its data while a job on host a holds
# the only slot and a job on host b waits for it: the holder's agent puts
# it back, nobody is granted anything during the grace, and the waiter
# enters only after the holder ends. Checked from outside (the jobs' own
# timestamps), ROUNDS times (8 by default), each with the kill at another
# point of the holder's renewal period (a third of the lease), so that the
# rounds cover the whole period rather than wherever chance puts them.
# The re-assertion must come before the holder fences itself: a time
# bound, so the test runs alone (tests/meson.build). A lease of 6 s:
# the holder fences 4 s after its last renewal, the kill falls up to 1.75 s
# after one, and the agent tries Redis again about 0.1, 0.3, 0.7 and 1.5 s
# after losing it: a restart of up to 1.5 s is re-asserted in time (a
# lease of 2 s left 0.75 s, a restart of 0.3 s; with two other tests on
# the cores, Valkey's lost the slot).
TTL_MS=6000
TTL=$((TTL_MS / 1000))s
. "$(dirname "$0")/lib.sh"

ROUNDS=${ROUNDS:-8}
start_redis
start_agent a
start_agent b

job() {
        local host=$1 round=$2
        fs "$host" run --slots 1 --wait 60s reset -- sh -c '
                echo "enter $FLEETSEM_TOKEN $(date +%s%N) $0" >>"$1"
                while [ ! -f "$2" ]; do sleep 0.02; done
                echo "exit $FLEETSEM_TOKEN $(date +%s%N) $0" >>"$1"' "$host" "$T/events-$round" "$T/go-$round-$host"
}
lease_a() { rcli ZRANGE 'fleetsem:{reset}:holders' 0 -1; }

good=0
for round in $(seq 1 "$ROUNDS"); do
        ev=$T/events-$round
        job a "$round" & ja=$!
        wait_for 10 grep -q '^enter' "$ev" || { not_ok "round $round: a's job did not start"; continue; }
        job b "$round" & jb=$!
        wait_for 10 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{reset}:queue') = 1 ]" ||
                { not_ok "round $round: b's job did not queue"; continue; }
        held=$(lease_a)
        # Where in a's renewal period (TTL/3) the kill falls: a renewal moves
        # the lease's expiry in Redis; after the next one, each round waits
        # a further (round - 1) / ROUNDS of the period (the fault's timing,
        # not a wait for anything).
        expiry=$(rcli ZSCORE 'fleetsem:{reset}:holders' "$held")
        wait_for 10 sh -c "[ \"\$(redis-cli -s $REDIS_SOCK ZSCORE 'fleetsem:{reset}:holders' '$held')\" != '$expiry' ]" ||
                { not_ok "round $round: a's lease was not renewed"; }
        sleep "$(awk -v r="$round" -v n="$ROUNDS" -v p=$((TTL_MS / 3)) 'BEGIN { printf "%.3f", (r - 1) * p / n / 1000 }')"   # not synchronisation: where in the period the fault falls

        kill -KILL "$(cat "$T/redis.pid")" || bail "round $round: no redis-server to kill"
        wait_for 10 sh -c "! redis-cli -s $REDIS_SOCK ping" || bail "round $round: redis-server still answers after SIGKILL"
        rm -f "$T/redis.pid" "$REDIS_SOCK"
        start_redis
        # Re-asserted: the new Redis, empty when it started, has a's lease.
        wait_for 10 sh -c "[ \"\$(redis-cli -s $REDIS_SOCK ZRANGE 'fleetsem:{reset}:holders' 0 -1)\" = '$held' ]" ||
                { not_ok "round $round: the holder was not re-asserted"; }
        in_redis=$(lease_a | wc -l)
        # The holder ends; only then may the waiter enter.
        touch "$T/go-$round-a"
        wait "$ja"
        wait_for 30 sh -c "[ \$(grep -c '^enter' $ev) -ge 2 ]" || { not_ok "round $round: b's job never entered"; }
        touch "$T/go-$round-b"
        wait "$jb"
        order=$(sort -k3,3n "$ev" | awk '{ print $1 "-" $4 }' | tr '\n' ' ')
        if [ "$order" = "enter-a exit-a enter-b exit-b " ] && [ "$in_redis" = 1 ]; then
                good=$((good + 1))
        else
                echo "# round $round: $order (holders in Redis after the reset: $in_redis)"
                sed 's/^/#   /' "$ev"
        fi
done
is "$good" "$ROUNDS" "the waiter entered only after the holder ended, in $good of $ROUNDS rounds"
tokens=$(cat "$T"/events-* | awk '$1 == "enter" { print $2 }' | sort -n)
is "$(echo "$tokens" | wc -l)" $((2 * ROUNDS)) "$((2 * ROUNDS)) grants"
is "$(echo "$tokens" | uniq -d)" "" "no token was handed out twice"
is "$(metric a fleetsem_lost_total) $(metric b fleetsem_lost_total)" "0 0" "no slot was lost on either host"
is "$(metric a 'fleetsem_grants_total{name="reset"}') $(metric b 'fleetsem_grants_total{name="reset"}')" \
        "$ROUNDS $ROUNDS" "each host counted a grant a round"
done_testing
