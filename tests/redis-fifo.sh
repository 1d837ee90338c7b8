#!/bin/bash
# With --slots 1, requests queued in a known order (from two agents, taking
# turns) are granted in that order.
. "$(dirname "$0")/lib.sh"

start_redis
start_agent a
start_agent b

fs a run --slots 1 fifo -- sh -c 'while [ ! -f "$0" ]; do sleep 0.02; done' "$T/go" &
holder=$!
check "the first request holds the slot" wait_for 5 sh -c "[ \$(redis-cli -s $T/redis.sock ZCARD 'fleetsem:{fifo}:holders') = 1 ]"

pids=()
for i in 1 2 3 4 5 6; do
        host=$([ $((i % 2)) = 1 ] && echo a || echo b)
        fs "$host" run --slots 1 fifo -- sh -c 'echo "$1" >>"$0"; sleep 0.05' "$T/order" "$i" &     # not synchronisation: the job's run time
        pids+=($!)
        wait_for 5 sh -c "[ \$(redis-cli -s $T/redis.sock ZCARD 'fleetsem:{fifo}:queue') = $i ]" ||
                not_ok "request $i did not queue"
done
is "$(waiters fifo)" 6 "six requests wait in line"
is "$(fs a status --json fifo | python3 -c 'import json,sys; d=json.load(sys.stdin); print(" ".join(str(w["position"]) for w in d["names"][0]["waiters"]))')" \
        "1 2 3 4 5 6" "status lists the waiters in queue order"

touch "$T/go"
wait "$holder"
for p in "${pids[@]}"; do wait "$p"; done
is "$(tr '\n' ' ' <"$T/order")" "1 2 3 4 5 6 " "granted in the order they queued"
is "$(holders fifo)" 0 "nothing held at the end"
done_testing
