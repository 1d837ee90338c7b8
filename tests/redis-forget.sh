#!/bin/bash
# What Redis forgets while it stays up: FLUSHALL, FLUSHDB, a DEL of any of
# a name's keys, of the census or of the epoch. Two agents ("hosts"); a's
# job holds a slot of 1 and outlives the lease many times over, with
# --on-lost=ignore, so that a second holder would show as b's job starting
# while a's still runs; b has a waiter from before the loss and a new
# caller after it. After each loss: a's agent puts its slot back with its
# token, nobody on b is granted while a's job runs, a loses nothing, and
# once a's job ends b's waiter gets in.
TTL=2s
. "$(dirname "$0")/lib.sh"

start_redis
start_agent a
start_agent b

holder_of() { rcli ZRANGE "fleetsem:{$1}:holders" 0 -1; }
# job HOST NAME TAG: notes "enter TAG MS" in $T/order with its slot, runs
# until $T/go-TAG exists, then notes "leave TAG MS".
job_for() {
        local host=$1 name=$2 tag=$3
        fs "$host" run --slots 1 --on-lost=ignore "$name" -- sh -c "echo enter $tag \$(date +%s%3N) \$FLEETSEM_TOKEN >>'$T/order'; \
                while [ ! -e '$T/go-$tag' ]; do sleep 0.05; done; echo leave $tag \$(date +%s%3N) >>'$T/order'" \
                2>>"$T/run-$tag.err"
}
entered() { grep -q "^enter $1 " "$T/order" 2>/dev/null; }
at() { awk -v w="$1" -v t="$2" '$1 == w && $2 == t { print $3 }' "$T/order"; }
token_of() { awk -v t="$1" '$1 == "enter" && $2 == t { print $4 }' "$T/order"; }
# The name's forget mark is gone: the lease after the loss is over.
grace_over() { [ "$(rcli HEXISTS "fleetsem:{$1}:clock" '~')" = 0 ]; }
holds() { [ "$(holder_of "$1")" = "$2" ]; }
# put_back NAME LEASE TOKEN: Redis has the holder again, with its record and token.
put_back() { holds "$1" "$2" && [ "$(record "$1" "$2" 4)" = "$3" ]; }
# first_in NAME: the tag of b's job that got in after a's ("" none yet).
first_in() { awk -v n="$1" '$1 == "enter" && ($2 == "w" n || $2 == "c" n) { print $2; exit }' "$T/order"; }
lost_a() { metric a fleetsem_lost_total; }

touch "$T/order"
case_n=0
# forget WHAT COMMAND...: one loss, and everything checked around it.
forget() {
        local what=$1 n ha wb cb lease token
        shift
        case_n=$((case_n + 1))
        n=f$case_n
        job_for a "$n" "a$n" & ha=$!
        wait_for 10 entered "a$n" || { not_ok "$what: a's job holds $n"; return; }
        job_for b "$n" "w$n" & wb=$!
        wait_for 10 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{$n}:queue') = 1 ]" ||
                { not_ok "$what: b's job waits for $n"; return; }
        lease=$(holder_of "$n")
        token=$(token_of "a$n")
        # The loss, while Redis stays up.
        "$@" "$n" >/dev/null
        # A new caller after it, on the host that waits.
        job_for b "$n" "c$n" & cb=$!
        check "$what: a's agent puts its slot back (lease $lease), with its token" wait_for 10 put_back "$n" "$lease" "$token"
        if [ "$what" != "DEL of the epoch" ]; then
                check "$what: the name grants nothing for a lease, then grants again" wait_for 10 grace_over "$n"
        fi
        check "$what: a still holds" holds "$n" "$lease"
        log_lacks "$T/order" "^enter (w|c)$n " "^enter a$n " "$what: neither of b's jobs started while a's runs"
        touch "$T/go-a$n"
        wait "$ha"
        is "$?" 0 "$what: a's job ends well (its slot was never lost)"
        # (b's waiter lost its place with the rest, and queued again at its
        # next renewal: the new caller may be first.)
        check "$what: one of b's jobs gets in after a's job" wait_for 10 sh -c "[ -n \"\$(awk '\$1 == \"enter\" && \$2 ~ /^[wc]$n\$/' $T/order)\" ]"
        first=$(first_in "$n")
        check "$what: ... not before a's job left ($(at leave "a$n") <= $(at enter "$first"))" \
                [ "$(at leave "a$n")" -le "$(at enter "$first")" ]
        check "$what: ... with a higher token" [ "$(token_of "$first")" -gt "$token" ]
        touch "$T/go-w$n" "$T/go-c$n"
        wait "$wb" "$cb"
}
del_keys() { local n=${*: -1} k=(); for s in "${@:1:$#-1}"; do k+=("fleetsem:{$n}:$s"); done; rcli DEL "${k[@]}"; }

forget "FLUSHALL" sh -c "redis-cli -s $REDIS_SOCK FLUSHALL"
forget "FLUSHDB" sh -c "redis-cli -s $REDIS_SOCK FLUSHDB"
forget "DEL of all of a name's keys" del_keys holders queue waiters clock
forget "DEL of its holders" del_keys holders
forget "DEL of its hash (state and records)" del_keys clock
forget "DEL of its line" del_keys queue waiters
forget "HDEL of its state alone" sh -c "redis-cli -s $REDIS_SOCK HDEL 'fleetsem:{\$0}:clock' ."
forget "DEL of the census and the name" sh -c "redis-cli -s $REDIS_SOCK DEL fleetsem:census 'fleetsem:{\$0}:holders' 'fleetsem:{\$0}:clock'"
forget "DEL of the epoch" sh -c "redis-cli -s $REDIS_SOCK DEL fleetsem:epoch"

check "the agent of a says what Redis forgot, and that it put the slot back" \
        grep -q "Redis forgot the slot of f1 (token [0-9]*) while it stayed up (FLUSHALL, DEL or eviction); putting it back\\." \
        "$T/agent-a.log"
check "... and re-asserted it" grep -q "Re-asserted slot of f1" "$T/agent-a.log"
is "$(lost_a)" 0 "no slot on a counted lost, through every loss"
# Every job's stderr first (three a loss: a's, b's waiter's, b's caller's),
# so that no file missing passes for no message; then run's messages of a
# lost slot, whole (src/cli/run.c). (A waiter's note of the grace, "Redis
# lost its fleetsem state", is no job's slot lost.)
errs=("$T"/run-*.err)
is "$(ls "${errs[@]}" 2>/dev/null | wc -l)" $((3 * case_n)) "every job's fleetsem run left its stderr"
grep -hE ': lost the slot \(token |assuming the slot of .* is lost|keeps running without a slot' "${errs[@]}" >"$T/lost"
case $? in
0) not_ok "no job's fleetsem run said its slot was lost"; sed 's/^/#   /' "$T/lost" ;;
1) ok "no job's fleetsem run said its slot was lost" ;;
*) not_ok "no job's fleetsem run said its slot was lost: its stderr could not be read" ;;
esac

stop_agents
done_testing
