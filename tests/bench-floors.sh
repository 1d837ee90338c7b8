#!/bin/bash
# The benchmark's floors, run short against the test's own redis-server:
# the benchmark still drives the agent's scripts as args.list and keys.list
# say (a call Redis refuses ends it with an error, not a figure). Figures
# are the benchmark's, not checked here (lua-scripts counts a grant's
# commands exactly).
. "$(dirname "$0")/lib.sh"

[ -x "${FLEETSEM_BENCH:-}" ] || bail "FLEETSEM_BENCH names no benchmark binary"
start_redis
BENCH_ONLY=L BENCH_SATURATE_MS=300 "$FLEETSEM_BENCH" "$REDIS_SOCK" "$FLEETSEM" "$NSBASE-a" >"$T/bench.log" 2>"$T/bench-err.log"
is "$?" 0 "the floors run to the end"
is "$(cat "$T/bench-err.log")" "" "... and Redis refused no call"
l4=$(sed -n 's/^L4 .* \([0-9][0-9]*\) grants\/s .* \([0-9.]*\) commands\/grant$/\1 \2/p' "$T/bench.log")
l5=$(sed -n 's/^L5 .* \([0-9][0-9]*\) grants\/s .* \([0-9.]*\) commands\/grant$/\1 \2/p' "$T/bench.log")
like "$l4" '^[1-9][0-9]* 1[2-9]\.[0-9]$' "L4: the agent's acquire and release scripts grant, at 12 commands or so a grant ($l4)"
like "$l5" '^[1-9][0-9]* 6\.0$' "L5: the peer's algorithm grants, at 6 commands a grant ($l5)"

# A call Redis refuses ends the benchmark, saying so, instead of counting.
rcli ACL SETUSER default -evalsha >/dev/null
BENCH_ONLY=L BENCH_SATURATE_MS=300 "$FLEETSEM_BENCH" "$REDIS_SOCK" "$FLEETSEM" "$NSBASE-a" >"$T/refused.log" 2>&1
is "$?" 1 "with EVALSHA refused, the benchmark fails"
like "$(cat "$T/refused.log")" "fleetsem-bench: Redis refused a call: NOPERM" "... saying why"
is "$(grep -c '^L4' "$T/refused.log")" 0 "... and prints no L4 figure"
done_testing
