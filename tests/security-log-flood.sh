#!/bin/bash
# Log flood: nobody sends 2000 requests it is not permitted in a burst. The
# agent writes at most 20 lines about that uid in a minute, then one line
# with the count of those it suppressed; root's LOST in the same minute is
# still written.
TTL=2s
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-security.sh"

start_redis
start_agent a

fs a run --slots 1 victim-log -- sh -c 'while [ ! -f "$0" ]; do sleep 0.05; done' "$T/go" 2>/dev/null &
check "root holds a slot" wait_for 5 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{victim-log}:holders') = 1 ]"
t0=$(now_ms)
out=$(attack a bad 2000 not-allowed)
printf '%s\n' "$out" | sed 's/^/# reply: /'
like "$out" 'code=permission.* 2000$' "nobody's 2000 requests are refused"
# Redis forgets root's lease: the next renewal finds it missing.
rcli ZREM 'fleetsem:{victim-log}:holders' "$(rcli ZRANGE 'fleetsem:{victim-log}:holders' 0 -1)" >/dev/null
check "root's LOST is written in the same minute" wait_for 10 grep -q "LOST slot of victim-log" "$T/agent-a.log"
n=$(grep -c "uid $NOBODY_UID\b" "$T/agent-a.log")
echo "# lines about uid $NOBODY_UID: $n"
check "at most 21 lines about nobody so far ($n)" test "$n" -le 21
check "the suppressed ones are counted once the minute is over" \
        wait_for 75 grep -qE "Suppressed 19[0-9]{2} message\(s\) caused by uid $NOBODY_UID" "$T/agent-a.log"
grep "Suppressed" "$T/agent-a.log" | sed 's/^/# /'
echo "# $(( ($(now_ms) - t0) / 1000 ))s after the burst"
touch "$T/go"
done_testing
