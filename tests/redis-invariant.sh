#!/bin/bash
# 3 agents x 60 concurrent "fleetsem run --slots 3" jobs: never more than 3
# at once, all 180 run, tokens unique, on Redis' clock and rising in grant
# order, as the jobs themselves record them.
. "$(dirname "$0")/lib.sh"

start_redis
for h in a b c; do start_agent "$h"; done

# Redis' clock in µs (TIME), as the scripts read it.
redis_us() { rcli TIME | awk 'NR == 1 { s = $1 } NR == 2 { printf "%d%06d\n", s, $1 }'; }
# Each job records, beside its token and its own clock (ns): its host,
# Redis' clock read before it asked, and Redis' clock read once granted.
job() {
        local before
        before=$(redis_us)
        fs "$1" run --slots 3 inv -- sh -c '
                granted=$(redis-cli -s "$2" TIME | awk "NR == 1 { s = \$1 } NR == 2 { printf \"%d%06d\n\", s, \$1 }")
                echo "enter $FLEETSEM_TOKEN $(date +%s%N) $0 $3 $granted" >>"$1"
                sleep 0.02      # not synchronisation: the job runs 20 ms
                echo "exit $FLEETSEM_TOKEN $(date +%s%N) $0" >>"$1"' "$1" "$T/events" "$REDIS_SOCK" "$before"
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
for h in a b c; do
        is "$(awk -v h="$h" '$1 == "enter" && $4 == h' "$T/events" | wc -l)" 60 "60 of them through agent $h"
done

int_of max "$(sort -k3,3n "$T/events" | awk '$1 == "enter" { n++; if (n > max) max = n } $1 == "exit" { n-- } END { print max + 0 }')"
check "never more than 3 ran at once (max seen: $max)" [ "$max" -le 3 ]
check "the slots were used (max seen: $max)" [ "$max" -ge 2 ]

# enter TOKEN NS HOST BEFORE_US GRANTED_US, one line a job.
awk '$1 == "enter"' "$T/events" >"$T/grants"
check "each job recorded its token and Redis' clock" awk '
        NF != 6 || $2 !~ /^[1-9][0-9]*$/ || $5 !~ /^[1-9][0-9]*$/ || $6 !~ /^[1-9][0-9]*$/ ||
        length($5) != 16 || length($6) != 16 { exit 1 }' "$T/grants"
is "$(awk '{ print $2 }' "$T/grants" | sort -n | uniq | wc -l)" 180 "180 distinct tokens"
# The rule (src/agent/library/lua/prelude/clocks.lua, next_token): a token is the name's
# counter plus one, raised to the tokens' clock, which is Redis' clock in µs
# less the steps of it seen within one Redis process (none here). So no
# token is below Redis' clock when its job asked, nor ahead of Redis' clock
# once granted by more than the grants made (one µs each, at most).
below=$(awk '$2 < $5 { n++ } END { print n + 0 }' "$T/grants")
is "$below" 0 "no token is below Redis' clock (µs) read before its job asked"
ahead=$(awk '$2 > $6 + 180 { n++ } END { print n + 0 }' "$T/grants")
is "$ahead" 0 "no token is ahead of Redis' clock read once granted (by more than 180 µs)"
# Grant order from the jobs' own records: a job that was granted (Redis'
# clock once granted) before another asked (Redis' clock before it asked)
# has the lower token.
read -r pairs wrong < <(awk '{ tok[NR] = $2; bef[NR] = $5; got[NR] = $6 }
        END {
                for (i = 1; i <= NR; i++)
                        for (j = 1; j <= NR; j++)
                                if (got[i] < bef[j]) { pairs++; if (tok[i] >= tok[j]) wrong++ }
                print pairs + 0, wrong + 0
        }' "$T/grants")
check "jobs granted before others asked: $pairs pairs" [ "$pairs" -gt 0 ]
is "$wrong" 0 "tokens rise in grant order in all of them"

is "$(holders inv)" 0 "no holder left in Redis"
is "$(waiters inv)" 0 "no waiter left in Redis"
done_testing
