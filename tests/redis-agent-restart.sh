#!/bin/bash
# Agent restart (SIGTERM, then start again) while its jobs hold: the slots
# stay held (anchors live in the jobs), nobody else gets in, and the slots
# are released when the jobs end. The agent is away for a second: well
# inside two thirds of the lease, after which its holders would rightly
# stop believing in their slots (fleetsem run fences itself then).
TTL=6s
. "$(dirname "$0")/lib.sh"

start_redis
start_agent a
start_agent b

pids=()
for i in 1 2; do
        fs a run --slots 2 ar -- sh -c 'while [ ! -f "$0" ]; do sleep 0.05; done' "$T/go" &
        pids+=($!)
done
check "two jobs hold" wait_for 5 sh -c "[ \$(redis-cli -s $T/redis.sock ZCARD 'fleetsem:{ar}:holders') = 2 ]"
fs b run --slots 2 ar -- sh -c 'echo "$FLEETSEM_TOKEN" >"$0"' "$T/granted" &
waiter=$!
check "a third waits" wait_for 5 sh -c "[ \$(redis-cli -s $T/redis.sock ZCARD 'fleetsem:{ar}:queue') = 1 ]"
fs a run --slots 2 ar -- sh -c 'echo "$FLEETSEM_TOKEN" >"$0"' "$T/granted-a" &
waiter_a=$!
check "a fourth waits, on the agent about to restart" wait_for 5 sh -c "[ \$(redis-cli -s $T/redis.sock ZCARD 'fleetsem:{ar}:queue') = 2 ]"
queue_before=$(rcli ZRANGE 'fleetsem:{ar}:queue' 0 -1 | tr '\n' ' ')
before=$(rcli ZRANGE 'fleetsem:{ar}:holders' 0 -1 | sort | tr '\n' ' ')

kill -TERM "$(agent_pid a)"
wait "$(agent_pid a)"
is "$?" 0 "the agent exits cleanly on SIGTERM"
same_leases() { [ "$(rcli ZRANGE 'fleetsem:{ar}:holders' 0 -1 | sort | tr '\n' ' ')" = "$before" ]; }
check "while the agent is down (1 s), Redis keeps both leases" still_after 1 same_leases
start_agent a
check "the new agent re-adopts both slots" wait_for 5 grep -q "Re-adopted 2 held slot" "$T/agent-a.log"
# Longer than the lease TTL: unrenewed slots would have expired.
check "the same two leases hold for 7 s, longer than the lease TTL" still_after 7 same_leases

check "nobody else got in during the restart" test ! -e "$T/granted"
is "$(rcli ZRANGE 'fleetsem:{ar}:queue' 0 -1 | tr '\n' ' ')" "$queue_before" \
        "the waiter of the restarted agent asked again and kept its place in line"
is "$(rcli ZRANGE 'fleetsem:{ar}:holders' 0 -1 | sort | tr '\n' ' ')" "$before" "the same two leases hold"
is "$(fs a status --json ar | python3 -c 'import json,sys; print(json.load(sys.stdin)["names"][0]["held"])')" 2 \
        "status through the new agent shows both"

touch "$T/go"
for p in "${pids[@]}"; do wait "$p" || not_ok "job $p failed"; done
check "the waiter gets in once the jobs end" wait_for 5 test -s "$T/granted"
wait "$waiter"
check "then the waiter of the restarted agent" wait_for 5 test -s "$T/granted-a"
wait "$waiter_a"
is "$?" 0 "which ran its command"
# (Both slots free at once here, so both waiters are granted together, in
# whichever order their agents ask; order with one slot: redis-fifo.)
check "all released" wait_for 2 sh -c "[ \$(redis-cli -s $T/redis.sock ZCARD 'fleetsem:{ar}:holders') = 0 ]"
is "$(rcli HLEN 'fleetsem:host:{a}')" 0 "the host index is empty again"
done_testing
