#!/bin/bash
# Redis restart (with its append-only file) while slots are held: the agents
# reconnect on their own, the holders keep their slots, no slot is granted
# twice, and the queue moves on afterwards.
# headroom: a 30-s lease (holders fence at 20 s): the restart and its
# append-only file's load took over 6 s with load averages near 20
TTL=30s
. "$(dirname "$0")/lib.sh"

REDIS_ARGS=(--appendonly yes --appendfsync always)
start_redis "${REDIS_ARGS[@]}"
start_agent a
start_agent b

job() {
        fs "$1" run --slots 2 rr -- sh -c '
                echo "enter $FLEETSEM_TOKEN $(date +%s%N)" >>"$0"
                while [ ! -f "$1" ]; do sleep 0.05; done
                echo "exit $FLEETSEM_TOKEN $(date +%s%N)" >>"$0"' "$T/events" "$T/go"
}
pids=()
job a & pids+=($!)
job a & pids+=($!)
check "two jobs hold" wait_for 5 sh -c "[ \$(redis-cli -s $T/redis.sock ZCARD 'fleetsem:{rr}:holders') = 2 ]"
job b & pids+=($!)
job b & pids+=($!)
check "two more wait" wait_for 5 sh -c "[ \$(redis-cli -s $T/redis.sock ZCARD 'fleetsem:{rr}:queue') = 2 ]"
before=$(rcli ZRANGE 'fleetsem:{rr}:holders' 0 -1 | sort | tr '\n' ' ')
# The latest expiry of a holder or waiter before the restart: a renewal on
# the Redis that came back moves every one past it.
latest() { rcli ZRANGE "fleetsem:{rr}:$1" -1 -1 WITHSCORES | tail -n 1; }
earliest() { rcli ZRANGE "fleetsem:{rr}:$1" 0 0 WITHSCORES | tail -n 1; }
is "$(metric a fleetsem_redis_reconnects_total) $(metric b fleetsem_redis_reconnects_total)" "0 0" "no reconnection yet"
last_holder=$(latest holders) last_waiter=$(latest waiters)

stop_redis
check "agent a noticed" wait_for 10 redis_state_is a down
check "agent b noticed" wait_for 10 redis_state_is b down
start_redis "${REDIS_ARGS[@]}"
check "agent a reconnected on its own" until_metric a fleetsem_redis_reconnects_total 1
check "agent b reconnected on its own" until_metric b fleetsem_redis_reconnects_total 1
# Both agents have renewed on the Redis that came back (one renewal each,
# at most a third of the lease apart): whatever they made of the restart
# is done.
renewed() { [ "$(earliest holders)" -gt "$last_holder" ] && [ "$(earliest waiters)" -gt "$last_waiter" ]; }
check "both agents renewed their leases on it" wait_for 10 renewed

is "$(rcli ZRANGE 'fleetsem:{rr}:holders' 0 -1 | sort | tr '\n' ' ')" "$before" "the same two leases hold"
is "$(grep -c '^enter' "$T/events")" 2 "the waiters still wait"

touch "$T/go"
for p in "${pids[@]}"; do wait "$p" || not_ok "job $p failed"; done
is "$(grep -c '^exit' "$T/events")" 4 "all four jobs ran"
int_of max "$(sort -k3,3n "$T/events" | awk '$1 == "enter" { n++; if (n > max) max = n } $1 == "exit" { n-- } END { print max + 0 }')"
# (Each job notes its exit before its fleetsem run releases, and a waiter
# its entry after its grant: on one clock, more than 2 is an over-grant,
# whatever the machine's speed. The evidence, when it happens: the jobs'
# own lines, and the agents' and Redis' logs that cleanup prints.)
check "never more than 2 at once (max seen: $max)" [ "$max" -le 2 ] ||
        sort -k3,3n "$T/events" | sed 's/^/#   /'
is "$(awk '$1 == "enter" { print $2 }' "$T/events" | sort -n | uniq -d)" "" "no token was granted twice"
fs a run --slots 2 rr -- true
is "$?" 0 "new requests are served after the restart"
done_testing
