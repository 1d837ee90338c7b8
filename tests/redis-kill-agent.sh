#!/bin/bash
# kill -9 of an agent while its job holds: Redis keeps the slot until the
# lease runs out (on Redis' clock), then another agent's waiter gets it;
# not before.
TTL=2s
. "$(dirname "$0")/lib.sh"

start_redis
start_agent a
start_agent b

fs a run --slots 1 ka -- sleep 300 &
check "holder holds" wait_for 5 sh -c "[ \$(redis-cli -s $T/redis.sock ZCARD 'fleetsem:{ka}:holders') = 1 ]"
fs b run --slots 1 ka -- sh -c 'date +%s%3N >"$0"' "$T/granted" &
waiter=$!
check "waiter queues" wait_for 5 sh -c "[ \$(redis-cli -s $T/redis.sock ZCARD 'fleetsem:{ka}:queue') = 1 ]"

kill -KILL "$(agent_pid a)"
wait "$(agent_pid a)"
is "$?" 137 "agent a is dead (SIGKILL)"
held=$(rcli ZRANGE 'fleetsem:{ka}:holders' 0 0)
expiry=$(rcli ZSCORE 'fleetsem:{ka}:holders' "$held")
expiry=${expiry%.*}
killed=$(now_ms)
check "the slot outlives its agent for now ($((expiry - killed)) ms to go)" [ "$expiry" -gt "$killed" ]
# The expiry Redis holds may move on (a gap of half a lease in every
# agent's calls counts as a step of its clock, which ends no lease): the
# last one it had before the grant is the one to compare with (the dead
# agent's lease's own: once granted, the first holder is the waiter).
deadline=$(( $(now_ms) + 10000 ))
while [ ! -s "$T/granted" ] && [ "$(now_ms)" -lt "$deadline" ]; do
        e=$(rcli ZSCORE 'fleetsem:{ka}:holders' "$held")
        [ -n "$e" ] && [ "${e%.*}" != "$expiry" ] && { echo "# the expiry moved from $expiry to ${e%.*}"; expiry=${e%.*}; }
        sleep 0.02      # not synchronisation: the poll that notes each move of the expiry
done
check "the waiter is granted once the lease expires" test -s "$T/granted"
granted=$(cat "$T/granted")
check "not before the lease expired (granted $((granted - expiry)) ms after expiry)" [ "$granted" -ge $((expiry - 5)) ]
check "soon after it expired (limit 1000 ms)" [ "$granted" -le $((expiry + 1000)) ]
wait "$waiter"
is "$?" 0 "the waiter's command ran"
done_testing
