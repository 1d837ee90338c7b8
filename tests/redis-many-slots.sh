#!/bin/bash
# One agent holds 3000 slots at once (more than the default limit of 1024
# open files), counts them all (status lists a page of them), and
# releases them all when their anchors close.
# headroom: a 10-s lease; 3000 grants took 17 s beside other work, and a
# 2-s lease lost a few of the first before the last were in.
TTL=10s
. "$(dirname "$0")/lib.sh"

start_redis
start_agent a
mkfifo "$T/go"
python3 "$(dirname "$0")/many-slots.py" "$NSBASE-a" many 3000 <"$T/go" >"$T/many.out" &
holder=$!
exec 3>"$T/go"
check "3000 requests are granted" wait_for 30 grep -q 'granted 3000' "$T/many.out"
is "$(holders many)" 3000 "Redis counts 3000 holders"
is "$(fs a status --json many | python3 -c 'import json,sys; n = json.load(sys.stdin)["names"][0]; print(len(n["holders"]), n["holders_total"], n["held"])')" \
        "100 3000 3000" "status lists a page of 100 and counts all 3000"
check "the agent watches 3000 anchors" [ "$(ls /proc/"$(agent_pid a)"/fd | wc -l)" -gt 3000 ]
echo >&3
exec 3>&-
wait "$holder"
check "all 3000 are released when their anchors close" \
        wait_for 10 sh -c "[ \$(redis-cli -s $T/redis.sock ZCARD 'fleetsem:{many}:holders') = 0 ]"
# (Each release's entry of the host index goes in a batch of its own,
# after the name's: the count reaches 0 a batch or more before it.)
check "the host index is empty again" wait_for 10 sh -c "[ \$(redis-cli -s $T/redis.sock HLEN 'fleetsem:host:{a}') = 0 ]"
done_testing
