#!/bin/bash
# The benchmark run short (its floors for 300 ms, A and B as they are, D
# for 1.5 s a run)
# against the test's own redis-server and agent: it still drives the
# agent's library as scripts.list and keys.list say, and the client and
# `fleetsem run` as they are used; a call Redis refuses, a refused
# `fleetsem run` or a scenario without samples ends it with an error, not
# a figure. Figures are the benchmark's, not checked here (lua-scripts
# counts a grant's commands exactly).
. "$(dirname "$0")/lib.sh"

[ -x "${FLEETSEM_BENCH:-}" ] || bail "FLEETSEM_BENCH names no benchmark binary"
start_redis
start_agent a
# B paired with another build's run (here this build's, through the same
# agent): both series in the same rounds.
BENCH_ONLY=LAB BENCH_SATURATE_MS=300 BENCH_B_VS_CLI=$FLEETSEM BENCH_B_VS_NS=$NSBASE-a \
        "$FLEETSEM_BENCH" "$REDIS_SOCK" "$FLEETSEM" "$NSBASE-a" >"$T/bench.log" 2>"$T/bench-err.log"
is "$?" 0 "the floors, A and B run to the end"
is "$(cat "$T/bench-err.log")" "" "... and Redis refused no call"
l4=$(sed -n 's/^L4 .* \([0-9][0-9]*\) grants\/s .* \([0-9.]*\) commands\/grant$/\1 \2/p' "$T/bench.log")
l5=$(sed -n 's/^L5 .* \([0-9][0-9]*\) grants\/s .* \([0-9.]*\) commands\/grant$/\1 \2/p' "$T/bench.log")
like "$l4" '^[1-9][0-9]* 1[2-9]\.[0-9]$' "L4: the agent's acquire and release scripts grant, at 12 commands or so a grant ($l4)"
# (Or so, as L4: a run of 300 ms counts the calls still in flight when it
# stops, which a slow build, under ASan, makes a tenth of a command a grant.)
like "$l5" '^[1-9][0-9]* 6\.[0-9]$' "L5: the peer's algorithm grants, at 6 commands or so a grant ($l5)"
p50() { sed -n "s/^$1 .* \([0-9][0-9.]*\) \+[0-9][0-9.]* *\$/\1/p" "$T/bench.log"; }
like "$(p50 A)" '^[1-9][0-9.]*$' "A: acquire -> release through the client code, timed ($(p50 A) us)"
like "$(p50 LA) $(p50 LAf)" '^[1-9][0-9.]* [1-9][0-9.]*$' "LA, LAf: A's floor and A without the agent, timed ($(p50 LA) $(p50 LAf) us)"
cost=$(for id in LA LAf A; do sed -n 's/^@json {"id":"'"$id"'-redis",.*"redis_cpu_us_per_grant":\([0-9.]*\),"redis_commands_per_grant":\([0-9.]*\)}$/\1 \2/p' "$T/bench.log"; done | paste -sd ' ')
like "$cost" '^([0-9]+\.[0-9] [0-9]+\.[0-9] ?){3}$' "LA, LAf, A: Redis' CPU and commands a grant, read ($cost: us and commands, each)"
# (The library's calls run more commands than LA's one script does, which
# a reading of the wrong counter or of another server would not show; the
# CPU itself is the benchmark's figure, not checked here.)
is "$(awk '{ print ($4 > $2 && $6 > $2) ? "yes" : "no" }' <<<"$cost")" yes "... and LAf's and A's commands a grant above LA's"
like "$(sed -n 's/^@json {"id":"A\/LA",.*"ratio":\([0-9.]*\),"la_over_floors":\([0-9.]*\)}$/\1 \2/p' "$T/bench.log")" \
        '^[0-9]+\.[0-9]+ [0-9]+\.[0-9]+$' "A over LA, and LA over L1 + L2"
like "$(p50 B)" '^[1-9][0-9.]*$' "B: fleetsem run -- /bin/true, timed ($(p50 B) us)"
like "$(p50 L1b) $(p50 L2b)" '^[1-9][0-9.]* [1-9][0-9.]*$' "L1b, L2b: the floors as B meets them, timed ($(p50 L1b) $(p50 L2b) us)"
# flock's overhead over /bin/true, then the two ratios: numbers above 0 and
# 1 when that overhead is, none when a loaded machine hides it (flock's p50
# at or below /bin/true's), the ratio then said to be missing.
b2=$(sed -n 's/^@json {"id":"B2",.*"flock_over_true_us":\(-\?[0-9.]*\),"ratio":\([^,]*\),"floors_ratio":\([^,]*\)}$/\1 \2 \3/p' "$T/bench.log")
like "$b2" '^([0-9]+\.[0-9]+ [0-9]+\.[0-9]+ [1-9][0-9]*\.[0-9]+|(-[0-9.]+|0\.0) null null)$' \
        "B2: B over /bin/true against flock's, and the floors' bound, or none when flock's overhead is none ($b2)"
like "$(grep -c '^@json {"id":"\(B\|Bvs\)",.*"samples":400,' "$T/bench.log")" '^2$' "B paired: 400 runs of each build"
like "$(sed -n 's/^ *B over \/bin\/true \/ Bvs.s *\([0-9.]*\)x$/\1/p' "$T/bench.log")" '^[0-9]+\.[0-9]+$' "... and the ratio of the two"
like "$(fs a status --json)" '"names":\[\]' "... and every run left its slot: the agent holds none"

# Group commit: the many-names run (D100: 1000 clients on 100 names, one
# agent) costs Redis fewer script calls than grants, as batches span names
# (a batch of one name would take over one). How many fewer depends on the
# machine's speed (0.06 at 9,000 grants/s, 0.31 at 291 under --busy): the
# bound is the property's, not a figure of one machine.
BENCH_ONLY=D BENCH_SATURATE_MS=300 BENCH_D_MS=1500 "$FLEETSEM_BENCH" "$REDIS_SOCK" "$FLEETSEM" "$NSBASE-a" \
        >"$T/d.log" 2>"$T/d-err.log"
is "$?" 0 "D runs to the end"
d100=$(sed -n 's/^D100 .* \([0-9][0-9]*\) grants\/s .* \([0-9][0-9.]*\) script calls\/grant .*/\1 \2/p' "$T/d.log")
like "$d100" '^[1-9][0-9]* [0-9]+\.[0-9]+$' "D100 grants ($d100: grants/s, script calls a grant)"
is "$(awk '{ print ($2 < 1) ? "yes" : "no" }' <<<"$d100")" yes "D100: fewer script calls than grants"

# A call Redis refuses ends the benchmark, saying so, instead of counting.
rcli ACL SETUSER default -fcall >/dev/null
BENCH_ONLY=L BENCH_SATURATE_MS=300 "$FLEETSEM_BENCH" "$REDIS_SOCK" "$FLEETSEM" "$NSBASE-a" >"$T/refused.log" 2>&1
is "$?" 1 "with FCALL refused, the benchmark fails"
like "$(cat "$T/refused.log")" "fleetsem-bench: Redis refused a call: NOPERM" "... saying why"
log_lacks "$T/refused.log" '^L4' 'fleetsem-bench: Redis refused a call: NOPERM' "... and prints no L4 figure"
done_testing
