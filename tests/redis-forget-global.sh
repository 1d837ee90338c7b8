#!/bin/bash
# What Redis forgets of its global keys while it stays up, each lost alone
# or with the loss it matters with: the fleet clock key after a quiet spell
# of the whole fleet longer than half a lease (its offset gathered it),
# the fleet clock key after a step of Redis' clock, the census and then
# (seconds later, after a call on another name made it again) a held
# name's keys, and one holder's record (HDEL of its field). Two agents
# ("hosts"); a's job holds a slot of 1 with --on-lost=ignore, b's job
# waits for it. After each loss: Redis never counts two holders while a's
# job runs (sampled), none of b's jobs starts before a's job left, a's
# job runs to its end with exit 0, and a is never told its slot was lost.
TTL=9s
TTL_S=9
. "$(dirname "$0")/lib.sh"

# Redis' wall clock stepped as an NTP step would (the fault harness' shim).
cc -O2 -Wall -Wextra -Werror -shared -fPIC -o "$T/clockstep.so" "$(dirname "$0")/chaos/clockstep.c" ||
        bail "cannot build the clock-step shim"
step_clock() { printf '%+023d\n' "$1" 1<>"$T/clock"; }
step_clock 0
LD_PRELOAD=$T/clockstep.so CLOCKSTEP_FILE=$T/clock start_redis
start_agent a
start_agent b

holder_of() { rcli ZRANGE "fleetsem:{$1}:holders" 0 -1; }
job_for() {
        local host=$1 name=$2 tag=$3
        fs "$host" run --slots 1 --on-lost=ignore "$name" -- sh -c "echo enter $tag \$(date +%s%3N) >>'$T/order'; \
                while [ ! -e '$T/go-$tag' ]; do sleep 0.05; done; echo leave $tag \$(date +%s%3N) >>'$T/order'" \
                2>>"$T/run-$tag.err"
}
entered() { grep -q "^enter $1 " "$T/order" 2>/dev/null; }
in_line() { [ "$(rcli ZCARD "fleetsem:{$1}:queue")" = 1 ]; }
b_out() { [ -z "$(awk -v t="w$1" '$1 == "enter" && $2 == t' "$T/order")" ]; }
at() { awk -v w="$1" -v t="$2" '$1 == w && $2 == t { print $3 }' "$T/order"; }
fleet_offset() { rcli GET fleetsem:clock | awk '{ print $2 }'; }
offset_above() { [ "$(fleet_offset)" -gt "$1" ]; }

touch "$T/order"
case_n=0
# forget WHAT COMMAND...: COMMAND NAME LEASE is the loss, made while a's
# job holds NAME and b's waits; everything checked around it.
forget() {
        local what=$1 n ha wb lease sampler
        shift
        case_n=$((case_n + 1))
        n=g$case_n
        job_for a "$n" "a$n" & ha=$!
        check "$what: a's job holds $n" wait_for 10 entered "a$n"
        job_for b "$n" "w$n" & wb=$!
        check "$what: b's job waits for $n" wait_for 10 in_line "$n"
        lease=$(holder_of "$n")
        # Redis' holders of the name, sampled until a's job ends.
        while :; do rcli ZCARD "fleetsem:{$n}:holders"; sleep 0.05; done >"$T/held-$n" 2>/dev/null & # not synchronisation: a sampler's period
        sampler=$!
        "$@" "$n" "$lease"
        check "$what: for two leases after it, none of b's jobs starts while a's runs" still_after $((2 * TTL_S)) b_out "$n"
        check "$what: a still holds" [ "$(holder_of "$n")" = "$lease" ]
        touch "$T/go-a$n"
        wait "$ha"
        is "$?" 0 "$what: a's job ran to its end, exit 0"
        kill "$sampler" # cleanup
        wait "$sampler" 2>/dev/null # cleanup
        is "$(sort -n "$T/held-$n" | tail -n 1)" 1 "$what: Redis never counted two holders ($(wc -l <"$T/held-$n") samples)"
        check "$what: b's job gets in after a's" wait_for 20 entered "w$n"
        check "$what: ... not before a's job left ($(at leave "a$n") <= $(at enter "w$n"))" \
                [ "$(at leave "a$n")" -le "$(at enter "w$n")" ]
        touch "$T/go-w$n"
        wait "$wb"
}

# (a) The whole fleet quiet (no call anywhere: nobody holds anything) for
# more than a lease: the next call sees a step, and the fleet clock's
# offset gathers it for good. Later, while a holds and b waits, the key
# lost.
fs b run --slots 1 warm -- true || bail "a call before the quiet spell failed"
o=$(fleet_offset)
sleep 11        # not synchronisation: the quiet spell's length, the fault itself
fs b run --slots 1 warm -- true || bail "a call after the quiet spell failed"
check "the quiet spell was taken for a step: the fleet clock's offset grew by it" offset_above $((o + 10000))
del_clock() { rcli DEL fleetsem:clock >/dev/null; }
forget "fleet clock lost after a quiet spell" del_clock

# (b) A step of Redis' clock (30 s forward), seen, then the key lost.
step_then_del() {
        local o
        o=$(fleet_offset)
        step_clock 30000
        wait_for 10 offset_above $((o + 25000)) || bail "the step was not seen"
        rcli DEL fleetsem:clock >/dev/null
}
forget "fleet clock lost after a step of Redis' clock" step_then_del

# (c) The census lost, made again by a call on another name, then the held
# name's keys lost 12 s later (more than a lease: the new census' first
# lease, in which a name it lacks counts as forgotten, is over).
census_then_keys() {
        rcli DEL fleetsem:census >/dev/null
        fs b run --slots 1 "other$1" -- true || bail "a call on another name failed"
        sleep 12        # not synchronisation: the time between the two losses, the fault itself
        rcli DEL "fleetsem:{$1}:holders" "fleetsem:{$1}:queue" "fleetsem:{$1}:waiters" "fleetsem:{$1}:clock" >/dev/null
}
forget "census lost, then the name's keys" census_then_keys

# (d) One holder's record lost (HDEL of its field), its entry still there.
record_hdel() { rcli HDEL "fleetsem:{$1}:clock" "$2" >/dev/null; }
forget "HDEL of the holder's record" record_hdel

is "$(metric a fleetsem_lost_total)" 0 "no slot on a counted lost, through every loss"
# Every job's stderr must be there to be read (a missing file would hide
# a LOST), then its lines that speak of a loss, less the grace's notice.
for f in "$T"/run-a*.err; do check "$(basename "$f") is there to read" test -r "$f"; done
lost=$(cat "$T"/run-a*.err | grep -i 'lost' | grep -cv ': no slot is granted for another ')
is "$lost" 0 "no job of a's fleetsem run was told its slot was lost"
[ "$lost" = 0 ] || cat "$T"/run-a*.err | grep -i 'lost' | sed 's/^/#   /'

stop_agents
done_testing
