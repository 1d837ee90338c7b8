#!/bin/bash
# Weighted jobs, on two agents ("hosts") and Redis: `fleetsem run --weight
# K` takes K units of the limit; status shows each one's weight; the line
# stays first come, first served (a heavy job at its head is not overtaken
# by a light one behind it, though a unit is free); a weight above the
# limit is refused with exit 64, before asking (above --slots) or by Redis
# (above the limit in force); the weight survives an agent restart (the
# slot is re-adopted with it).
# The lease is long enough for the restart below to fit in 2/3 of it, the
# silence after which big1's run, stopped meanwhile, fences itself:
# headroom: the restart took up to 0.5 s with three CPU hogs beside the
# test (load 8-20 on 2 cores); 6.7 s is over 10 times that.
TTL=10s
. "$(dirname "$0")/lib.sh"

start_redis
start_agent a
start_agent b
entered() { grep -c '^enter' "$T/order" 2>/dev/null || echo 0; }
units() { rcli HGET 'fleetsem:{w}:clock' . | cut -d' ' -f1; }

tagged_job a w big1 --slots 3 --weight 2 & big1=$!
check "a job of weight 2 holds (limit 3)" wait_for 10 grep -qx 'enter big1' "$T/order"
is "$(units) $(holders w)" "2 1" "Redis: 2 units held by 1 holder"
tagged_job b w big2 --slots 3 --weight 2 & big2=$!
check "a second of weight 2, on b, waits: 2 + 2 > 3" wait_for 10 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{w}:queue') = 1 ]"
tagged_job a w small --slots 3 & small=$!
check "a light one behind it waits too" wait_for 10 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{w}:queue') = 2 ]"
fs b run --slots 3 --no-wait w -- touch "$T/ran" 2>/dev/null
is "$?" 75 "one that does not wait is refused though a unit is free: nobody overtakes the heavy head"
check "... and did not run" [ ! -e "$T/ran" ]
is "$(entered)" 1 "only big1 runs"

st=$(fs b status w)
is "$(head -n 1 <<<"$st")" "w: 2 held, 2 waiting, limit 3" "status counts units held"
like "$st" "held +[0-9]+ +a .* 3 w2 " "status shows the holder's weight (LIMIT 3 w2)"
like "$st" "#1 +- +b .* 3 w2 " "... and the first waiter's"
js=$(fs a status --json w)
like "$js" '"position":1,"host":"b","pid":[0-9]+,"uid":0,"user":"root","slots":3,"weight":2' "status --json gives each one's weight"
like "$js" '"position":2,"host":"a","pid":[0-9]+,"uid":0,"user":"root","slots":3,"weight":1' "... 1 for an unweighted one"

# The heavy holder's agent restarts: its slot is re-adopted with its weight.
# big1's fleetsem run is stopped meanwhile: it would ask the new agent for
# its lease again as soon as it can connect, and on a busy machine before
# the agent's re-adoption looks (the lease then kept through the request,
# as it should be, but not through the host's index this checks).
run1=$(pgrep -x fleetsem -P "$big1") || bail "no fleetsem run under big1's job ($big1)"
stopped=$(now_ms)
kill -STOP "$run1"
kill -TERM "$(agent_pid a)"
wait "$(agent_pid a)"
is "$?" 0 "agent a exits cleanly on SIGTERM"
start_agent a
check "agent a re-adopts big1's slot" wait_for 10 grep -q 'Re-adopted 1 held slot' "$T/agent-a.log"
kill -CONT "$run1"
echo "# big1's run stopped through the restart for $(($(now_ms) - stopped)) ms (it fences itself at 2/3 of $TTL)"
is "$(rcli HGET 'fleetsem:host:{a}' "$(rcli ZRANGE 'fleetsem:{w}:holders' 0 0)" | awk '{ print $NF }')" 2 \
        "this host's index keeps the weight, for the re-adoption"
# The lease renewed by the new agent (its expiry in Redis moves on), with
# its weight kept.
expiry() { rcli ZSCORE 'fleetsem:{w}:holders' "$(rcli ZRANGE 'fleetsem:{w}:holders' 0 0)"; }
int_of expiry0 "$(expiry)"
renewed() { local e; e=$(expiry); [[ $e =~ ^[0-9]+$ ]] && [ "$e" -gt "$expiry0" ]; }
check "the new agent renews big1's lease" wait_for 30 renewed
is "$(units) $(entered) $(holders w)" "2 1 1" "... still 2 units held by 1 holder, and still only big1 runs"

touch "$T/go-big1"; wait "$big1"
is "$?" 0 "big1 ends"
check "both waiters fit then (2 + 1 of 3) and get in, in line order" wait_for 10 sh -c "[ \$(grep -c '^enter' '$T/order') = 3 ]"
is "$(sed -n 2,3p "$T/order" | sort | tr '\n' ' ')" "enter big2 enter small " "... both of them (one release hands both their slots)"
is "$(units)" 3 "Redis: 3 units held"
touch "$T/go-big2" "$T/go-small"; wait "$big2" "$small"

# Refused: above --slots (by fleetsem itself), above the limit in force (by Redis).
err=$(fs a run --slots 2 --weight 3 w -- true 2>&1); rc=$?
is "$rc" 64 "--weight above --slots is a usage error (64)"
like "$err" "A weight of 3 is above the 2 slot\(s\) asked for: it would never fit" "... saying why"
tagged_job a w low --slots 1 & low=$!
check "a holder asking 1 slot makes the limit in force 1" wait_for 10 grep -qx 'enter low' "$T/order"
err=$(fs b run --slots 3 --weight 2 w -- touch "$T/ran" 2>&1); rc=$?
is "$rc" 64 "a weight above the limit in force is refused by Redis (64)"
like "$err" "weight 2 is above the limit in force \(1\): it would never fit" "... saying why"
check "... and did not run" [ ! -e "$T/ran" ]
is "$(waiters w)" 0 "... and left nothing in line"
touch "$T/go-low"; wait "$low"
for bad in 0 -1 1000001 x; do
        fs a run --slots 3 --weight "$bad" w -- true >/dev/null 2>&1
        is "$?" 64 "--weight '$bad' is a usage error"
done
like "$(raw a "ACQUIRE name=w slots=1 lease=$(printf '%032d' 7) wait=0 weight=2")" \
        "^ERROR code=[a-z]+ message=weight%20above%20slots" "a raw request with a weight above its slots is refused"
done_testing
