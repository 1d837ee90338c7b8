#!/bin/bash
# A name with more holders and waiters than a page: fleetsem status lists
# the first 100 of each and says how many more there are (the totals in
# --json, with "truncated"); fleetsem metrics counts them all from the
# name's state, without reading a holder's record.
# Redis' command counts are the server's, so the agent's own renewals would
# show in them (its 130 waiters each read the first holder's expiry): a long
# lease keeps them out of the way, and a metrics run is judged only in a
# window that holds its one call of the library and no other.
TTL=60s
. "$(dirname "$0")/lib.sh"

start_redis
start_agent a
mkfifo "$T/go-h" "$T/go-w"
python3 "$(dirname "$0")/many-slots.py" "$NSBASE-a" bound 250 <"$T/go-h" >"$T/holders.out" &
holders_pid=$!
exec 3>"$T/go-h"
check "250 requests are granted" wait_for 30 grep -qx 'granted 250' "$T/holders.out"
python3 "$(dirname "$0")/many-slots.py" "$NSBASE-a" bound 130 250 600 <"$T/go-w" >"$T/waiters.out" &
waiters_pid=$!
exec 4>"$T/go-w"
check "130 more wait in line" wait_for 30 grep -qx 'granted 0 queued 130' "$T/waiters.out"
is "$(holders bound) $(rcli ZCARD 'fleetsem:{bound}:queue')" "250 130" "Redis counts 250 holders, 130 waiters"

# jq-less: the numbers of the one name in --json.
json=$(fs a status --json bound)
is "$(python3 -c 'import json, sys
n = json.loads(sys.argv[1])["names"][0]
print(n["held"], n["waiting"], n["holders_total"], n["waiters_total"], n["truncated"], len(n["holders"]), len(n["waiters"]))' "$json")" \
        "250 130 250 130 True 100 100" "status --json: the totals, truncated, and a page of 100 of each"
is "$(python3 -c 'import json, sys
w = json.loads(sys.argv[1])["names"][0]["waiters"]
print(w[0]["position"], w[-1]["position"])' "$json")" "1 100" "the waiters listed are the first 100 in line"
out=$(fs a status bound)
like "$out" "bound: 250 held, 130 waiting, limit 250" "the table's head counts them all"
like "$out" "… and 150 more holders" "the table says how many holders it left out"
like "$out" "… and 30 more waiting" "… and how many waiters"
is "$(grep -c ' held ' <<<"$out")" 100 "the table lists 100 holders"

# metrics: the counts of the name's state, not its records (no ZRANGE,
# no HGETALL: constant in the holders).
for _ in 1 2 3 4 5; do
        rcli CONFIG RESETSTAT >/dev/null
        metrics=$(fs a metrics)
        stats=$(rcli INFO commandstats)
        grep -q '^cmdstat_fcall:calls=1,' <<<"$stats" && break
done
like "$metrics" 'fleetsem_slots_held\{name="bound",scope="fleet"\} 250' "metrics: 250 held in the fleet"
like "$metrics" 'fleetsem_waiters\{name="bound",scope="fleet"\} 130' "metrics: 130 waiting in the fleet"
like "$metrics" 'fleetsem_limit\{name="bound",scope="fleet"\} 250' "metrics: the limit in force"
like "$stats" 'cmdstat_fcall:calls=1,' "the metrics run called the library once, and nothing else did"
check "… and read no holder or waiter list" sh -c '! printf "%s" "$1" | grep -qE "cmdstat_(zrange|hgetall):"' _ "$stats"
rcli CONFIG RESETSTAT >/dev/null
fs a status bound >/dev/null
like "$(rcli INFO commandstats)" 'cmdstat_zrange:' "(status does read them: the check above can fail)"

echo >&4
exec 4>&-
wait "$waiters_pid"
echo >&3
exec 3>&-
wait "$holders_pid"
check "all are released when their anchors close" \
        wait_for 10 sh -c "[ \$(redis-cli -s $T/redis.sock ZCARD 'fleetsem:{bound}:holders') = 0 ]"
is "$(rcli ZCARD 'fleetsem:{bound}:queue')" 0 "nobody waits any more"
done_testing
