#!/bin/bash
# The agent's Lua scripts on their own, against a real redis-server, as the
# agent loads them (its library, each script a function; KEYS in the order of keys.list):
# first come first served, the limit in force, owners, tokens that never go
# back, grace, idle names leaving Redis, expiry by the Redis clock, wake
# messages, the epoch key, the data model marker beside it, the epoch's
# move after a resharding (compare-and-set) and the status reply.
. "$(dirname "$0")/lib.sh"

SRC=$(cd "$(dirname "$0")/../src/agent/library" && pwd)
embed() { python3 "$SRC/embed-lua.py" "$@"; }
mapfile -t SUFFIXES < <(embed --keys "$SRC/keys.list")
[ "${#SUFFIXES[@]}" -gt 0 ] || bail "no key suffixes in keys.list"

# Redis' wall clock can be stepped, as an NTP step on its host would: the
# shim the fault harness uses, reading its offset in ms from $T/clock.
cc -O2 -Wall -Wextra -Werror -shared -fPIC -o "$T/clockstep.so" "$(dirname "$0")/chaos/clockstep.c" ||
        bail "cannot build the clock-step shim"
# The same length each time, written in place: never read half-done.
step_clock() { printf '%+023d\n' "$1" 1<>"$T/clock"; }
step_clock 0
start_stepped_redis() { LD_PRELOAD=$T/clockstep.so CLOCKSTEP_FILE=$T/clock start_redis; }
start_stepped_redis
[ "$(rcli --json PING)" = '"PONG"' ] || bail "redis-cli has no --json (redis-tools 7 or later)"
# The scripts as the agent's library (FUNCTION LOAD), each a function
# FN[SCRIPT] (fleetsem_SCRIPT_vN), every one of scripts.list.
mapfile -t SCRIPTS < <(embed --scripts "$SRC/scripts.list")
[ "${#SCRIPTS[@]}" -gt 0 ] || bail "no scripts in scripts.list"
LIBRARY=$(embed --library "$SRC/keys.list" "$SRC/scripts.list" "$SRC/replies.list" "$SRC/lua/library.version" \
        "$SRC/lua/prelude" && echo .) || bail "embed-lua.py makes no library"
LIBRARY=${LIBRARY%.}
declare -A FN
load_scripts() {
        local s v
        v=$(printf %s "$LIBRARY" | rcli -x FUNCTION LOAD REPLACE)
        [ "$v" = fleetsem ] || bail "the library does not load: $v"
        v=$(rcli FCALL fleetsem_version 0 | head -1)
        [[ $v =~ ^[1-9][0-9]*$ ]] || bail "fleetsem_version says $v"
        for s in "${SCRIPTS[@]}"; do FN[$s]=fleetsem_${s}_v$v; done
}
load_scripts
# snapshot NAME WHAT: Redis saves what it holds as NAME (check WHAT);
# restart_from NAME: Redis restarted from it, the library loaded again (as
# it was: Redis keeps it in its snapshot).
snapshot() { is "$(rcli SAVE)" OK "$2"; cp "$T/dump.rdb" "$T/$1.rdb"; }
restart_from() { stop_redis nosave; cp "$T/$1.rdb" "$T/dump.rdb"; start_stepped_redis; load_scripts; }
# emptied: Redis' data gone, and a census that says nobody held anything
# before (as an operator seeds a new Redis: fleetsemd(8)); what a loss
# without that does is under "What Redis forgets".
emptied() { rcli FLUSHALL >/dev/null; rcli ZADD "$CENSUS" -1 . >/dev/null; }
# left_idle NAME: the name's state gone as when its keys leave Redis idle
# (and the census no longer expects it).
left_idle() { rcli HDEL "$(key "$1" clock)" . >/dev/null; rcli ZREM "$CENSUS" "fleetsem:{$1}" >/dev/null; }

# The keys of NAME, one a line, in KEYS order; key NAME SUFFIX: one of them.
keys_of() { local s; for s in "${SUFFIXES[@]}"; do echo "fleetsem:{$1}:$s"; done; }
key() {
        local s
        for s in "${SUFFIXES[@]}"; do [ "$s" = "$2" ] && { echo "fleetsem:{$1}:$s"; return 0; }; done
        echo "# keys.list has no '$2'" >&2
        return 1
}
EPOCH_KEY=fleetsem:epoch
FLEET_CLOCK=fleetsem:clock
CENSUS=fleetsem:census
# The tests name leases by short words ("h", "w2"); a script takes a lease
# id, 32 lower-case hex digits (scripts.list), and refuses anything else.
# lid WORD: the id of that word (its bytes in hex, then zeros; an id is
# its own); unlid: its input with each such id as its word again.
lid() {
        if [[ $1 =~ ^[0-9a-f]{32}$ ]]; then echo "$1"; return 0; fi
        [[ $1 =~ ^[A-Za-z0-9_-]{1,12}$ ]] || bail "lid: '$1' is no lease word of 1 to 12 letters"
        local i h=
        for ((i = 0; i < ${#1}; i++)); do printf -v h '%s%02x' "$h" "'${1:i:1}"; done
        printf '%s%0*d\n' "$h" $((32 - ${#h})) 0
}
unlid() {
        perl -pe 's/\b((?:[0-9a-f]{2})+?)((?:00){4,})\b/my ($w, $id) = (pack("H*", $1), $1 . $2);
                length($id) == 32 && $w =~ m{^[A-Za-z0-9_-]+$} ? $w : $id/ge'
}
# rec NAME LEASE [FIELDS]: the lease's record in the name's hash, "HOST UID
# SLOTS TOKEN SINCE_MS PROOF DESCRIPTION" (cut -f FIELDS of it).
rec() { rcli HGET "$(key "$1" clock)" "$(lid "$2")" | cut -d' ' -f"${3:-1-}"; }
# state NAME FIELD: a field of the name's state, "HELD LINE LIMIT AT_LIMIT
# TOKEN TICKET TTL_MS OFFSET_MS EXPIRES_MS CLOCK_ID"; state_set NAME FIELD VALUE.
state() { rcli HGET "$(key "$1" clock)" . | cut -d' ' -f"$2"; }
state_set() {
        rcli HSET "$(key "$1" clock)" . "$(rcli HGET "$(key "$1" clock)" . | awk -v f="$2" -v v="$3" '{ $f = v; print }')" \
                >/dev/null
}
# held_until NAME LEASE: the holder's expiry on its name's own clock, its
# ZSCORE less the name's OFFSET_MS. A step of Redis' clock moves both by
# the step, and so does a pause of this test longer than half a lease
# (a busy machine), which the scripts cannot tell from one (observe()):
# what a call that extends or ends the lease changes, and a pause does not.
held_until() {
        local e o
        e=$(rcli ZSCORE "$(key "$1" holders)" "$(lid "$2")") o=$(state "$1" 8)
        if [[ $e =~ ^[0-9]+$ && $o =~ ^-?[0-9]+$ ]]; then echo $((e - o)); else echo "'$e' less '$o'"; fi
}
# counted NAME: the state's counts against the ZSETs and the records
# ("HELD LINE" twice when they agree): every field but the state ('.'),
# the drain ('!'), the last action ('@') and the fleet limit ('#').
counted() {
        echo "$(state "$1" 1-2) / $(rcli ZCARD "$(key "$1" holders)") $(rcli ZCARD "$(key "$1" queue)")" \
                "$(rcli HKEYS "$(key "$1" clock)" | grep -cvxE '[.!@#~]')"
}

# lua NAME SCRIPT ARGV...: the reply as JSON.
lua() {
        local name=$1 script=$2 k
        shift 2
        mapfile -t k < <(keys_of "$name"; echo "$FLEET_CLOCK"; echo "$CENSUS")
        rcli --json FCALL "${FN[$script]}" "${#k[@]}" "${k[@]}" "$@" | unlid
}
epoch() {          # ID GRACE_MS [MASTER_ID [FAILOVER_GRACE_MS]]
        args epoch id="$1" grace_ms="$2" ${3:+master_id="$3"} ${4:+failover_grace_ms="$4"}
        rcli --json FCALL "${FN[epoch]}" 1 "$EPOCH_KEY" "${ARGS_OUT[@]}"
}
# j JSON EXPR: EXPR over the reply r, strings bare, the rest as JSON.
j() {
        python3 -c 'import json, sys
v = eval(sys.argv[2], {"r": json.loads(sys.argv[1])})
print(v if isinstance(v, str) else json.dumps(v, separators=(",", ":")))' "$1" "$2"
}

# args SCRIPT NAME=VALUE...: SCRIPT's arguments in the order scripts.list
# gives (the agent's and the scripts' one list), into ARGS_OUT; NAME may
# come again for a rest argument ("leases..."), an optional one may be
# left out. A name the list does not have, or a required one missing, is a
# mistake of this test.
declare -A ARG_SPEC
for s in "${SCRIPTS[@]}"; do
        ARG_SPEC[$s]=$(embed --args "$SRC/scripts.list" "$s") || bail "scripts.list has no $s"
        ARG_SPEC[$s]=${ARG_SPEC[$s]//$'\n'/ }
done
args() {
        local script=$1 kv spec name known value
        local -A val=()
        local -a rest=()
        shift
        ARGS_OUT=()
        for kv in "$@"; do
                name=${kv%%=*} known=
                for spec in ${ARG_SPEC[$script]}; do [ "${spec%%[?.]*}" = "$name" ] && known=$spec; done
                [ -n "$known" ] || bail "scripts.list: $script has no argument '$name'"
                value=${kv#*=}
                case $name in
                lease|leases|proof) [ -z "$value" ] || value=$(lid "$value") || bail "args $script: $name '$value'" ;;
                esac
                if [ "${known%...}" != "$known" ]; then rest+=("$value"); else val[$name]=$value; fi
        done
        for spec in ${ARG_SPEC[$script]}; do
                name=${spec%%[?.]*}
                case $spec in
                *...) ARGS_OUT+=("${rest[@]}") ;;
                *\?) [ -n "${val[$name]+set}" ] && ARGS_OUT+=("${val[$name]}") ;;
                *) [ -n "${val[$name]+set}" ] || bail "args $script: '$name' is required"
                   ARGS_OUT+=("${val[$name]}") ;;
                esac
        done
}

# The callers, as the agent calls them; the caller is host a, uid 1000
# unless AS_HOST / AS_UID say otherwise; TTL_MS, GRACE and IDLE likewise;
# HOLD=1: a slot the host holds itself (the argument hold).
acquire() {         # NAME LEASE SLOTS [PROOF]; WEIGHT the units it takes (1)
        args acquire lease="$2" slots="$3" ttl_ms="${TTL_MS:-10000}" description="${DESC:-INFO lease=$2}" host="${AS_HOST:-a}" \
                uid="${AS_UID:-1000}" grace_until_ms="${GRACE:-0}" idle_ms="${IDLE:-600000}" weight="${WEIGHT:-1}" \
                hold="${HOLD:-0}" ${4:+proof="$4"}
        lua "$1" acquire "${ARGS_OUT[@]}"
}
release() {         # NAME LEASE
        args release lease="$2" host="${AS_HOST:-a}" uid="${AS_UID:-1000}" grace_until_ms="${GRACE:-0}" \
                idle_ms="${IDLE:-600000}"
        lua "$1" release "${ARGS_OUT[@]}"
}
renew() {           # NAME LEASE...
        local name=$1 lease leases=()
        shift
        for lease in "$@"; do leases+=("leases=$lease"); done
        args renew ttl_ms="${TTL_MS:-10000}" host="${AS_HOST:-a}" grace_until_ms="${GRACE:-0}" idle_ms="${IDLE:-600000}" \
                "${leases[@]}"
        lua "$name" renew "${ARGS_OUT[@]}"
}
reassert() {        # NAME LEASE SLOTS TOKEN SINCE; WEIGHT the units it takes (1)
        args reassert lease="$2" slots="$3" token="$4" since_ms="$5" ttl_ms="${TTL_MS:-10000}" description="INFO lease=$2" \
                host="${AS_HOST:-a}" uid="${AS_UID:-1000}" grace_until_ms="${GRACE:-0}" idle_ms="${IDLE:-600000}" \
                weight="${WEIGHT:-1}" hold="${HOLD:-0}"
        lua "$1" reassert "${ARGS_OUT[@]}"
}
adopt() {           # NAME LEASE
        args adopt lease="$2" ttl_ms="${TTL_MS:-10000}" host="${AS_HOST:-a}" uid="${AS_UID:-1000}"
        lua "$1" adopt "${ARGS_OUT[@]}"
}
status() { lua "$1" status; }
counts() { lua "$1" counts; }
drain() {           # NAME 1|0 [REASON]
        args drain on="$2" host="${AS_HOST:-a}" uid=0 user=root reason="${3:-}" grace_until_ms="${GRACE:-0}" \
                idle_ms="${IDLE:-600000}"
        lua "$1" drain "${ARGS_OUT[@]}"
}
revoke() {          # NAME LEASE [REASON]: root on AS_HOST; WHICH: 0 holders (default), w waiters, 1 both;
                    # NOW=1: freed at once (a host known dead)
        args revoke lease="$2" host="${AS_HOST:-a}" uid=0 user=root reason="${3:-}" grace_until_ms="${GRACE:-0}" \
                idle_ms="${IDLE:-600000}" waiters="${WHICH:-0}" ${NOW:+now="$NOW"}
        lua "$1" revoke "${ARGS_OUT[@]}"
}

fleet_limit() {     # NAME N [REASON]: root on AS_HOST sets the fleet limit (N 0: removes it)
        args limit n="$2" host="${AS_HOST:-a}" uid=0 user=root reason="${3:-}" grace_until_ms="${GRACE:-0}" \
                idle_ms="${IDLE:-600000}"
        lua "$1" limit "${ARGS_OUT[@]}"
}

redis_ms() { rcli TIME | { read -r s; read -r us; echo $((s * 1000 + us / 1000)); }; }
redis_us() { rcli TIME | { read -r s; read -r us; echo $((s * 1000000 + us)); }; }
# sub NAME: records NAME's wake channel in $T/wake-NAME until the end.
SUBSCRIBERS=()
sub() {
        rcli SUBSCRIBE "fleetsem:{$1}:wake" >"$T/wake-$1" 2>&1 &
        SUBSCRIBERS+=($!)
        wait_for 10 sh -c "[ \"\$(redis-cli -s '$REDIS_SOCK' PUBSUB NUMSUB 'fleetsem:{$1}:wake' | tail -n 1)\" = 1 ]" ||
                bail "no subscriber on fleetsem:{$1}:wake"
}
# wakes NAME: the messages heard so far (redis-cli prints each as three
# lines: "message", the channel, the message); heard NAME MESSAGE: one of them.
wakes() { awk 'before == "message" { print } { before = last; last = $0 }' "$T/wake-$1" | unlid; }
heard() { wakes "$1" | grep -qFx -- "$2"; }
# list ARGS...: a JSON list of numbers.
list() { local IFS=,; echo "[$*]"; }
TWO53=9007199254740992

# ---- First come, first served ------------------------------------------------
# Leases of a minute, here and in "One limit per name": no lease there may
# run out between its call and the last check (each check a python,
# seconds apiece on a busy machine; with 10 s, w3's ran out before the
# status that looks for it, and the limit's holders before its counts).
TTL_MS=60000
r=$(acquire fifo h 1)
is "$(j "$r" 'r[0::3]')" "[1,1]" "fifo: a free slot is granted at once (held 1)"
is "$(j "$r" 'r[4]')" 1 "fifo: the limit in force is the holder's slots"
for i in 1 2 3; do
        r=$(acquire fifo "w$i" 1)
        is "$(j "$r" 'r[:4]')" "[0,$i,1,1]" "fifo: w$i queues at position $i behind 1 holder, limit 1"
        is "$(j "$r" '0 < r[4] <= 60000')" true "fifo: w$i hears when the holder expires (${r})"
done
is "$(j "$(acquire fifo w2 1)" 'r[:4]')" "[0,2,1,1]" "fifo: asking again keeps the place in line"
r=$(release fifo h)
is "$(j "$r" '[r[0], r[1], len(r)]')" '[1,"w1",4]' "fifo: release hands the slot to the first in line"
is "$(release fifo w2)" "[0]" "fifo: a waiter that leaves the line held nothing"
r=$(release fifo w1)
is "$(j "$r" '[r[0], r[1], len(r)]')" '[1,"w3",4]' "fifo: the next release skips the one that left"
is "$(j "$(status fifo)" '[h[0] for h in r[1]] + [w[0] for w in r[2]]')" '["w3"]' "fifo: w3 holds, nobody waits"
# The counts a call reads instead of counting: after each kind of change
# they are what the ZSETs and the records say ("HELD LINE / holders queue records").
is "$(counted fifo)" "1 0 / 1 0 1" "fifo: the name's counts are its ZSETs' after grants, hand-overs, leavers"

# ---- One limit per name --------------------------------------------------------
# (Leases of a minute, as above: each holder here must outlast the checks
# until its release.)
TTL_MS=60000
acquire lim h 1 >/dev/null
r=$(acquire lim w1 3)
is "$(j "$r" 'r[:4]')" "[0,1,1,1]" "limit: slots=3 behind a holder with slots=1 queues, limit 1"
is "$(j "$(acquire lim w2 3)" 'r[:4]')" "[0,2,1,1]" "limit: a second slots=3 queues behind it"
is "$(j "$(status lim)" 'r[3]')" 1 "limit: status says limit 1"
r=$(release lim h)
is "$(j "$r" '[r[0]] + r[1::3]')" '[1,"w1","w2"]' "limit: the slots=1 holder gone, both slots=3 are granted"
is "$(j "$(status lim)" '[len(r[1]), r[3]]')" "[2,3]" "limit: 2 hold, limit 3"
is "$(j "$(acquire lim x 1)" 'r[:4]')" "[0,1,2,1]" "limit: slots=1 with 2 holders queues (limit 1)"
is "$(j "$(acquire lim y 5)" 'r[:4]')" "[0,2,2,1]" "limit: slots=5 behind it sees limit 1 too"
is "$(release lim w1)" "[1]" "limit: one of 2 holders leaves: still 1 ≥ limit 1, nobody granted"
r=$(release lim w2)
is "$(j "$r" '[r[0]] + r[1::3]')" '[1,"x"]' "limit: the last leaves: x is granted, y (behind the limit 1) is not"
is "$(counted lim)" "1 1 / 1 1 2" "limit: counted right (x holds, y waits)"
is "$(state lim 3-4)" "1 1" "limit: the limit in force 1, asked for by one"
unset TTL_MS

# ---- Owners ------------------------------------------------------------------
acquire own L 1 >/dev/null
snap() { held_until own L; rec own L; state own 1-4; }
before=$(snap)
is "$(rec own L 1-2)" "a 1000" "owner: the lease belongs to 'a 1000'"
is "$(AS_HOST=b acquire own L 1)" "[-1]" "owner: acquire from another host: -1"
is "$(AS_UID=1001 acquire own L 1)" "[-1]" "owner: acquire from another uid: -1"
is "$(AS_HOST=b release own L)" "[-1]" "owner: release from another host: -1"
is "$(AS_UID=1001 release own L)" "[-1]" "owner: release from another uid: -1"
is "$(AS_HOST=b TTL_MS=600000 renew own L)" '[0,"L"]' "owner: renew from another host: missing"
is "$(AS_HOST=b reassert own L 1 5 1)" "-1" "owner: reassert from another host: -1"
is "$(AS_UID=1001 reassert own L 1 5 1)" "-1" "owner: reassert from another uid: -1"
is "$(AS_HOST=b adopt own L)" "[-1]" "owner: adopt from another host: -1"
is "$(AS_UID=1001 adopt own L)" "[-1]" "owner: adopt from another uid: -1"
is "$(snap)" "$before" "owner: the owner's lease is untouched (expiry, record, counts, limit)"
is "$(TTL_MS=600000 AS_UID=0 renew own L)" "[0]" "owner: the owner's host renews (any uid)"
is "$(j "$(rcli ZSCORE "$(key own holders)" "$(lid L)")" "r - $(redis_ms) > 500000")" true "owner: ... and the expiry moved"
r=$(adopt own L)
is "$(j "$r" '[r[0], r[3]]')" '[1,"INFO lease=L"]' "owner: the owner adopts it"
is "$(j "$r" '"%d %d" % (r[1], r[2])')" "$(rec own L 4-5)" "owner: adopt tells its token and since"
is "$(adopt own nobody)" "[-1]" "adopt: an unknown lease is gone"
acquire own Q 1 >/dev/null
is "$(adopt own Q)" "[0]" "adopt: a waiter is only queued"
is "$(renew own L Q nobody)" '[0,"nobody"]' "renew: extends holder and waiter, reports the unknown"

# ---- Tokens never go back ------------------------------------------------------
# The tokens' clock: Redis' less the steps (and silences) seen so far in
# this process (the fleet clock key's TOKEN_OFFSET_MS). A slow test makes
# silences: a pause of more than half the shortest lease between two calls
# (a machine loaded by other tests) is a step to the scripts, and the
# offset, which grows within one process (steps back, the only fall, come later), is read after the calls; what of it is below 0 is no part of the clock.
token_offset_ms() { rcli GET "$FLEET_CLOCK" | awk '{ o = ($4 == "" ? 0 : $4); print (o > 0 ? o : 0) }'; }
# tokens_clock_before T0_US: the tokens' clock at Redis' time T0_US, or
# below it: by the offset as it stands now, after the calls.
tokens_clock_before() { echo $(( $1 - $(token_offset_ms) * 1000 )); }
t0=$(redis_us)
tokens=()
for i in 1 2 3 4 5; do
        r=$(TTL_MS=60000 acquire tok "t$i" 5)
        tokens+=("$(j "$r" 'r[1]')")
        is "$(rec tok "t$i" 4)" "${tokens[-1]}" "tokens: grant $i: its record has the same digits"
done
t0=$(tokens_clock_before "$t0")
is "$(j "$(list "${tokens[@]}")" "all($t0 < t < $TWO53 for t in r) and r == sorted(set(r))")" true \
        "tokens: 5 grants rise, above the tokens' clock in µs before them ($t0), below 2^53: ${tokens[*]}"
emptied
r=$(acquire tok t6 5)
t6=$(j "$r" 'r[1]')
is "$(j "$t6" "r > ${tokens[4]} and r < $TWO53")" true "tokens: after FLUSHALL the next token $t6 is above all 5"
is "$(rec tok t6 4)" "$t6" "tokens: ... its digits in its record, not rounded"
is "$(state tok 5)" "$t6" "tokens: ... and in the counter"
# Redis back with an older counter (a restored snapshot): still above all.
state_set tok 5 7
t7=$(j "$(acquire tok T7 5)" 'r[1]')
is "$(j "$t7" "r > $t6")" true "tokens: with the counter set back to 7 (old data), the next token $t7 is above all before, $t6 too"

# ---- Grace ---------------------------------------------------------------------
acquire gr h 1 >/dev/null
# Ten seconds of grace: the four calls below must all fall inside it, also
# on a machine loaded by sanitizers or a container.
G=$(( $(redis_ms) + 10000 ))
is "$(j "$(GRACE=$G acquire gr2 w 2)" 'r[:4]')" "[0,1,0,2]" "grace: a free name queues a request while in grace"
is "$(j "$(GRACE=$G acquire gr w 1)" 'r[:4]')" "[0,1,1,1]" "grace: a waiter behind a holder"
is "$(GRACE=$G release gr h)" "[1]" "grace: release frees the slot and hands nothing on"
is "$(rcli ZCARD "$(key gr holders)") $(rcli ZCARD "$(key gr queue)")" "0 1" "grace: nobody holds, w still waits"
granted_after_grace() { r=$(GRACE=$G acquire gr w 1) && [ "$(j "$r" 'r[0]')" = 1 ]; }
if wait_for 25 granted_after_grace; then
        is "$(j "$r" "r[2] >= $G")" true "grace: after it the same call grants (since $(j "$r" 'r[2]') ≥ $G)"
else
        not_ok "grace: after it the same call grants (last reply $r)"
fi
G=$(( $(redis_ms) + 60000 ))
big=$(( $(redis_us) + 1000000000 ))
is "$(j "$(GRACE=$G acquire ra W 2)" 'r[:4]')" "[0,1,0,2]" "grace: a new request on a free name waits"
is "$(reassert ra L 2 "$big" 1234)" 1 "grace: reassert works meanwhile"
is "$(state ra 5)" "$big" "grace: ... and raises the counter to its token"
is "$(rec ra L 4-5)" "$big 1234" "grace: ... and keeps its token and since"
is "$(reassert ra N 2 5 1234)" 1 "reassert: a second holder fits slots=2"
is "$(state ra 5)" "$big" "reassert: a lower token does not lower the counter"
is "$(reassert ra M 2 5 1234)" 0 "reassert: a third is lost (2 hold, limit 2)"
is "$(reassert ra L 2 5 1234)" 1 "reassert: a holder already there stays"
t0=$(redis_us)
reassert ra2 L 1 5 1234 >/dev/null
t0=$(tokens_clock_before "$t0")
is "$(j "$(state ra2 5)" "r > $t0")" true "reassert: a lost counter starts from the tokens' clock ($t0 or later), not from a low token"
is "$(counted ra)" "2 1 / 2 1 3" "reassert: the counts are the ZSETs' (2 hold, W waits, 3 records)"

# ---- A slot a host holds itself, after a reset -----------------------------------
# Its host may be down (rebooting) through the reset and its grace, unable
# to put it back or to fence itself: no slot a host would hold itself is
# granted for the caller's lease (its host_lease) after the grace. Redis
# came back without b's slot (a stale snapshot: the name's state is there,
# b's grant is not); the reset's grace is over, c asks with a 60 s lease.
# What makes it such a slot is the argument hold, never the description
# (text for people, which no script reads).
G=$(( $(redis_ms) - 1000 ))
r=$(GRACE=$G TTL_MS=60000 HOLD=1 AS_HOST=c acquire hh c 1)
is "$(j "$r" 'r[:4]')" "[0,1,0,1]" "host-held after a reset: c waits though nobody holds (the grace ended 1 s ago)"
is "$(j "$r" "58000 <= r[4] <= 59000 and r[5] == r[4]")" true \
        "... and is told to look again once its lease after the grace is over, and why it waits ($(j "$r" 'r[4:6]') ms)"
is "$(j "$(GRACE=$G acquire hh2 j 1)" 'r[0]')" 1 "... a job's acquire on another free name after the grace is granted"
is "$(rec hh c | cut -d' ' -f7-)" "+host INFO lease=c" "... its record says the host holds it (+host), before its description"
is "$(j "$(GRACE=$G TTL_MS=60000 DESC='INFO host=c hold=host reason=kernel' AS_HOST=c acquire hh5 c 1)" 'r[0]')" 1 \
        "... a description that says hold=host, without the argument, is no such slot: granted after the grace"
is "$(j "$(GRACE=$((G - 60000)) TTL_MS=60000 HOLD=1 AS_HOST=c acquire hh c 1)" 'r[0]')" 1 \
        "... granted once its lease after the grace is over"
is "$(j "$(GRACE=0 TTL_MS=60000 HOLD=1 AS_HOST=c acquire hh3 c 1)" 'r[0]')" 1 \
        "... and on a Redis whose reset the caller does not know (grace_until 0)"
# Handed on by a release: a waiting host-held slot is left to its own
# acquire (grant_next cannot tell how long it must wait), which a plain
# wake message sends it to.
sub hh4
acquire hh4 j 1 >/dev/null
TTL_MS=60000 HOLD=1 AS_HOST=c acquire hh4 c 1 >/dev/null
is "$(release hh4 j)" "[1]" "host-held waiter: the release hands nothing on"
is "$(rcli ZCARD "$(key hh4 holders)") $(rcli ZCARD "$(key hh4 queue)")" "0 1" "... nobody holds, c still waits"
check "... and wakes the line ('1')" wait_for 5 heard hh4 1
is "$(j "$(TTL_MS=60000 HOLD=1 AS_HOST=c acquire hh4 c 1)" 'r[0]')" 1 "... c's own acquire then grants it"
# Its lease run out unrenewed: "x LEASE HOST host" on the name's channel
# for the agents' journals, before the '1' that wakes the line; a plain
# holder's expiry says only '1'.
sub hh6
granted() { [ "$(j "$(acquire "$1" "$2" 1)" 'r[0]')" = 1 ]; }
TTL_MS=300 acquire hh6 p 1 >/dev/null
acquire hh6 n 1 >/dev/null
# headroom: each poll a call and a python, and p's lease ends only in a
# call after the gap a slow poll makes has been taken for a step once:
# 4.5 s under load (three CPU hogs, load 15 on 2 cores); 30 s is 6 times it.
check "expiry: n is granted once plain p's lease ran out" wait_for 30 granted hh6 n
check "... which wakes the line ('1')" wait_for 5 heard hh6 1
check "... and says no 'x p a host' before it" eval '! heard hh6 "x p a host"'
release hh6 n >/dev/null
TTL_MS=300 HOLD=1 AS_HOST=c acquire hh6 c 1 >/dev/null
acquire hh6 m 1 >/dev/null
check "expiry: m is granted once c's lease, held by its host, ran out" wait_for 30 granted hh6 m
check "... told as 'x c c host'" wait_for 5 heard hh6 "x c c host"

# ---- Idle names leave Redis ----------------------------------------------------
# The PTTL of each key of NAME (default idle) that exists, as a JSON list.
pttls() {
        local k t ttls=()
        for k in $(keys_of "${1:-idle}"); do t=$(rcli PTTL "$k"); [ "$t" = -2 ] || ttls+=("$t"); done
        list "${ttls[@]}"
}
IDLE=5000 acquire idle L 1 >/dev/null
p=$(pttls)
is "$(j "$p" 'len(r) == 2 and all(0 < t <= 5000 for t in r)')" true "idle: the keys that exist (holders, the hash) live 5000 ms: $p"
IDLE=60000 renew idle L >/dev/null
p=$(pttls)
is "$(j "$p" 'len(r) == 2 and all(5000 < t <= 60000 for t in r)')" true "idle: a renewal that asks for longer refreshes them: $p"
IDLE=60000 renew idle L >/dev/null
is "$(j "$(pttls)" "r == $p")" false "idle: (time passes: the PTTLs change)"
p2=$(pttls)
IDLE=60000 renew idle L >/dev/null
is "$(j "$(pttls)" "all(t <= q for t, q in zip(r, $p2))")" true "idle: one just after, with the same idle time, writes no expiry"
# One that asks for less while the name is held cuts nothing short:
# callers' idle times differ (a user's names minutes, root's a day, a
# host's own slot twice host_lease), and the longer may be what keeps
# another lease's keys.
p2=$(pttls)
IDLE=5000 renew idle L >/dev/null
is "$(j "$(pttls)" "len(r) == 2 and all(5000 < t <= q for t, q in zip(r, $p2))")" true \
        "idle: one that asks for less while L holds writes no earlier expiry"
# The release writes nothing that needs time to live: the name leaves when
# its last renewal said.
is "$(IDLE=5000 release idle L)" "[1]" "idle: released"
left=$(for k in $(keys_of idle); do [ "$(rcli EXISTS "$k")" = 1 ] && echo "${k##*:}"; done | paste -sd, -)
is "$left" "clock" "idle: only the name's hash is left (its state: the counters)"
p=$(pttls)
is "$(j "$p" 'len(r) == 1 and all(5000 < t <= 60000 for t in r)')" true "idle: it lives what its last longer renewal gave it: $p"
# A name its callers all give 5000 ms (long enough that a loaded machine's
# pause between two calls does not outlast it) leaves 5000 ms after its
# last use.
IDLE=5000 acquire idle2 L 1 >/dev/null
IDLE=5000 renew idle2 L >/dev/null
is "$(IDLE=5000 release idle2 L)" "[1]" "idle: another name, released"
p=$(pttls idle2)
is "$(j "$p" 'len(r) == 1 and all(0 < t <= 5000 for t in r)')" true "idle: ... it lives 5000 ms from the last renewal: $p"
gone() { [ "$(rcli EXISTS $(keys_of idle2))" = 0 ]; }
check "idle: all keys of the released name are gone after 5000 ms" wait_for 15 gone
IDLE=0 acquire idle0 L 1 >/dev/null
status idle0 >/dev/null
is "$(rcli PTTL "$(key idle0 holders)")" -1 "idle: idle_ms 0 sets no expiry (and deletes nothing); status sets none"

# ---- Expiry by the Redis clock -------------------------------------------------
sub exp
r=$(TTL_MS=300 acquire exp h 1)
score=$(rcli ZSCORE "$(key exp holders)" "$(lid h)")
is "$(j "$r" 'r[0]')" 1 "expiry: h holds"
is "$(j "$score" "r - $(j "$r" 'r[2]')")" 300 "expiry: until since + 300 ms"
acquire exp w 1 >/dev/null
# (The waiter's agent asks again as h's lease runs out, which sweeps it; a
# looker, status, drops nothing after what may be a step: a gap of more
# than half of h's lease, the shortest, in every call.)
expired() { acquire exp w 1 >/dev/null; [ "$(j "$(status exp)" '[h[0] for h in r[1] if h[0] == "h"]')" = "[]" ]; }
# headroom: as hh6's, 2.7 s under load; 30 s.
check "expiry: h is dropped once Redis's clock passes its expiry" wait_for 30 expired
check "expiry: that wakes the waiters ('1')" wait_for 5 heard exp 1
is "$(rcli HEXISTS "$(key exp clock)" "$(lid h)")" 0 "expiry: h is forgotten (its record)"
r=$(counted exp)
is "$(j "\"$r\"" 'r.split(" / ")[0] == r.split(" / ")[1][:3] and int(r[-1]) == sum(map(int, r.split()[:2]))')" true \
        "expiry: the counts follow the ZSETs and records ($r)"

# ---- Clock steps ---------------------------------------------------------------
# The fleet's clock key says when a script last ran on any name; setting it
# back (or ahead) is what a step of Redis' clock looks like to the next one.
fleet_offset() { rcli GET "$FLEET_CLOCK" | awk '{ print $2 }'; }
# fleet_id: the key's ID (the clock its offsets are of); fleet_is LAST
# [ERA]: the key says LAST, the same clock (its era ERA, 0 unless given).
fleet_id() { rcli GET "$FLEET_CLOCK" | awk '{ print $7 }'; }
fleet_is() { rcli SET "$FLEET_CLOCK" "$1 $(fleet_offset) ${2:-0} 0 - 0 $(fleet_id)" >/dev/null; }
name_offset() { state "$1" 8; }
acquire fwd h 1 >/dev/null
acquire fwd w 1 >/dev/null
acquire other o 1 >/dev/null
off0=$(fleet_offset)
t=$(redis_ms)
rcli ZADD "$(key fwd holders)" $((t - 1000)) "$(lid h)" >/dev/null
fleet_is $((t - 9000))          # nothing ran for 9 s: a forward step of ~9 s
r=$(acquire fwd x 1)
# x's wait, 10 s from its call, renewed for a minute (as its agent would,
# and no step in this call: the gap since the last is a moment): the checks
# up to its turn below take more than 10 s on a busy machine, and a wait
# that runs out queues again behind y.
TTL_MS=60000 acquire fwd x 1 >/dev/null
is "$(j "$r" 'r[:2]')" "[0,2]" "clock forward: h, stepped past its expiry, still holds (x queues 2nd)"
is "$(j "$(rcli ZSCORE "$(key fwd holders)" "$(lid h)")" "$t + 7000 <= r <= $(redis_ms) + 8000")" true \
        "clock forward: h's expiry moved by the step (9 s)"
is "$(j "$(fleet_offset)" "r - $off0 >= 9000")" true "clock forward: the fleet's offset moved by the step"
is "$(name_offset fwd)" "$(fleet_offset)" "clock forward: the name is on the fleet's offset now"
# Another name, not seen since before the step: moved when it is.
t=$(redis_ms)
rcli ZADD "$(key other holders)" $((t - 500)) "$(lid o)" >/dev/null
is "$(j "$(acquire other p 1)" 'r[0]')" 0 "clock forward: o, on a name seen later, still holds"
is "$(j "$(rcli ZSCORE "$(key other holders)" "$(lid o)")" "r >= $t + 8000")" true "clock forward: ... moved by the step"
release fwd h >/dev/null
t=$(redis_ms)
rcli ZADD "$(key fwd holders)" $((t + 13000)) "$(lid w)" >/dev/null
fleet_is $((t + 5000))          # last call 5 s in the future: the clock went back ~5 s
acquire fwd y 1 >/dev/null
is "$(j "$(rcli ZSCORE "$(key fwd holders)" "$(lid w)")" "$t + 7000 <= r <= $(redis_ms) + 8000")" true \
        "clock back: w keeps the 8 s it had left, not 13 (the step is taken off)"
is "$(j "$(TTL_MS=60000 acquire fwd x 1)" 'r[:2]')" "[0,1]" "clock: x still waits, first in line"
t=$(redis_ms)
rcli ZADD "$(key fwd holders)" $((t - 1)) "$(lid w)" >/dev/null
# 3 s of a 30 s lease: time passing, not a step. The gap z's call sees is
# the 3 s and the commands from redis_ms to its call; headroom: those took
# up to 1 s with three CPU hogs beside the test (load 17 on 2 cores), and
# a step is a gap over 15 s (half the lease), 12 s on: 12 times that.
fleet_is $((t - 3000))
TTL_MS=30000 acquire fwd z 1 >/dev/null
echo "# z's call came $(( $(redis_ms) - t )) ms after t at most"
is "$(rcli ZSCORE "$(key fwd holders)" "$(lid w)")" "" "clock: a gap under half a lease is time: w's lease ended"
is "$(j "$(acquire fwd x 1)" 'r[0]')" 1 "clock: x, first in line, gets in"
# A name nobody called for 9 s while others were called: its agent was cut
# off, not the clock stepped; its lease runs out on time.
acquire cut c 1 >/dev/null
t=$(redis_ms)
rcli ZADD "$(key cut holders)" $((t - 1000)) "$(lid c)" >/dev/null
is "$(j "$(acquire cut q 1)" 'r[0]')" 1 "clock: a name alone unseen is no step: c ran out, q gets in"
# Redis restored from a snapshot 9 s old, its new state's grace ended 5 s
# ago: what it has is old data, not a step; its dead leases run out.
acquire old h 1 >/dev/null
t=$(redis_ms)
rcli ZADD "$(key old holders)" $((t - 1000)) "$(lid h)" >/dev/null
fleet_is $((t - 9000))
before=$(rcli GET "$FLEET_CLOCK")
r=$(status old)
is "$(j "$r" '[h[0] for h in r[1]]')" '["h"]' "clock: status after a step drops nothing..."
is "$(rcli GET "$FLEET_CLOCK")" "$before" "... and writes nothing"
is "$(j "$(GRACE=$((t - 5000)) acquire old x 1)" 'r[0]')" 1 "clock: data older than the grace is no step: h ran out, x gets in"
t=$(redis_ms)
fleet_is $((t - 9000))
rcli ZADD "$(key old holders)" $((t - 1000)) "$(lid x)" >/dev/null
GRACE=$((t - 5000)) renew old x >/dev/null
is "$(rcli ZSCORE "$(key old holders)" "$(lid x)")" "" "clock: ... renew alike (x ran out, and was not renewed)"
is "$(status nock >/dev/null; rcli EXISTS "$(key nock clock)")" 0 "clock: status alone never creates the key"
# Within one Redis state every step counts, also during its grace period,
# and also one that takes the clock back to before the grace began: its
# correction forward is a step too. The fleet's clock key names the state
# its writer knew (its grace_until).
acquire era h 1 >/dev/null
t=$(redis_ms)
g=$((t + 2000))
GRACE=$g renew era h >/dev/null
is "$(rcli GET "$FLEET_CLOCK" | awk '{ print $3 }')" "$g" "clock: the fleet's clock key names the state its writer knew"
rcli ZADD "$(key era holders)" $((t - 1000)) "$(lid h)" >/dev/null
fleet_is $((t - 9000)) "$g"   # back before the grace began, then forward
GRACE=$g acquire era x 1 >/dev/null
is "$(j "$(rcli ZSCORE "$(key era holders)" "$(lid h)")" "r >= $t + 7000")" true \
        "clock: a step forward from before the grace of the same state: h still holds, its expiry moved by the step"
# A re-assertion after a reset knows the reset: the key from before it is
# old data, not a step; and after it, steps count for re-assertions too.
t=$(redis_ms)
rcli ZADD "$(key era holders)" $((t - 1000)) "$(lid h)" >/dev/null
fleet_is $((t - 9000)) "$g"
GRACE=$((g + 5000)) reassert era y 1 5 1 >/dev/null
is "$(rcli ZSCORE "$(key era holders)" "$(lid h)")" "" "clock: a key from before the reset the caller knows is no step: h ran out"
is "$(rcli GET "$FLEET_CLOCK" | awk '{ print $3 }')" "$((g + 5000))" "clock: ... and the key names the new state"
t=$(redis_ms)
rcli ZADD "$(key era holders)" $((t - 1000)) "$(lid y)" >/dev/null
fleet_is $((t - 9000)) $((g + 5000))
GRACE=$((g + 5000)) reassert era z 1 6 1 >/dev/null
is "$(j "$(rcli ZSCORE "$(key era holders)" "$(lid y)")" "r >= $t + 7000")" true "clock: a re-assertion sees a step in its own state: y keeps its lease"
is "$(rcli PTTL "$FLEET_CLOCK")" -1 "clock: the fleet's clock key never expires"
# Leases of different lengths (a slot a host holds itself has host_lease,
# here 4 of the 4-s leases): a gap is judged by the shortest lease among
# the callers (the key's SHORT_MS), not by the caller's own; a step of
# 3 s, under half the long lease, first seen by a long lease's caller, is
# still a step for the short ones (finding 18: the harness' host-held
# `reboot` renewed first after a 7.45-s step, and `solo` granted twice).
fleet_last_is() { rcli SET "$FLEET_CLOCK" "$(rcli GET "$FLEET_CLOCK" | awk -v t="$1" '{ $1 = t; print }')" >/dev/null; }
TTL_MS=16000 acquire mixh r 1 >/dev/null
TTL_MS=4000 acquire mix a 1 >/dev/null
TTL_MS=4000 acquire mix w 1 >/dev/null
is "$(rcli GET "$FLEET_CLOCK" | awk '{ print $6 }')" 4000 "clock: the fleet's clock key keeps the shortest lease of its callers"
t=$(redis_ms)
rcli ZADD "$(key mix holders)" $((t - 1000)) "$(lid a)" >/dev/null
fleet_last_is $((t - 3000))             # a 3-s step: over half the short lease, under half the long
TTL_MS=16000 renew mixh r >/dev/null
is "$(j "$(TTL_MS=4000 acquire mix w 1)" 'r[:2]')" "[0,1]" \
        "clock: a step first seen by a longer lease's caller is a step for the shorter: a still holds, w waits"
is "$(j "$(rcli ZSCORE "$(key mix holders)" "$(lid a)")" "r >= $t + 1500")" true "clock: ... a's expiry moved by the step"
# Such a gap counts once: the short lease's callers may be gone, and the
# long leases' own calls are time again (their dead leases run out).
release mix a >/dev/null
release mix w >/dev/null
t=$(redis_ms)
fleet_last_is $((t - 3000))
TTL_MS=16000 renew mixh r >/dev/null
is "$(rcli GET "$FLEET_CLOCK" | awk '{ print $6 }')" 16000 "clock: a gap only the shorter lease calls a step forgets it"
rcli ZADD "$(key mixh holders)" $((t - 1)) "$(lid r)" >/dev/null
fleet_last_is $((t - 3000))
is "$(j "$(TTL_MS=16000 acquire mixh s 1)" 'r[0]')" 1 "clock: ... then a 3-s gap of the long leases is time: r ran out, s gets in"

# Tokens across a real step of Redis' clock and a restore from a snapshot
# of before it: the step forward, tokens handed out during it, the clock
# put right, then Redis restarted from the older snapshot. Tokens follow
# the tokens' clock, which takes the step out; had they followed TIME,
# those of the step would be ahead of the restored Redis by the step.
emptied        # a clock never stepped before
t=$(redis_us)
t0=$(redis_ms)
ta=$(j "$(acquire step a 5)" 'r[1]')
is "$(j "$ta" "$t < r < $(redis_us)")" true "clock step: a grant before it, on Redis' clock ($ta)"
snapshot before-step "clock step: a snapshot"
step_clock 30000
r=$(acquire step b 5)
tb=$(j "$r" 'r[1]')
is "$(j "$r" 'r[0]')" 1 "clock step: 30 s forward, b is granted"
el=$(( $(redis_ms) - 30000 - t0 ))   # real time since a
is "$(j "$(fleet_offset)" "29000 <= r <= 30000 + $el")" true "clock step: the step is seen (fleet offset $(fleet_offset) ms)"
is "$(j "$(rcli GET "$FLEET_CLOCK" | awk '{ print $4 }')" "29000 <= r <= 30000 + $el")" true "clock step: ... also by the tokens' clock"
is "$(j "$tb" "$ta < r < $(redis_us) - 25000000")" true \
        "clock step: b's token $tb is above a's and follows the tokens' clock, not Redis' stepped TIME"
step_clock 0
r=$(acquire step c 5)
tc=$(j "$r" 'r[1]')
is "$(j "$r" 'r[0]')" 1 "clock step: put right, c is granted"
is "$(j "$tc" "$tb < r < $(redis_us) + 1000000")" true "clock step: c's token $tc is above b's, and not ahead of Redis' clock by the step"
restart_from before-step
is "$(state step 5)" "$ta" "clock step: Redis restarted from the snapshot: its counter is a's again"
r=$(GRACE=$(( $(redis_ms) - 1 )) acquire step d 5)
is "$(j "$r" 'r[0]')" 1 "clock step: after the restart (a reset whose grace is over) d is granted"
is "$(j "$r" "r[1] > $tc")" true "clock step: d's token $(j "$r" 'r[1]') is above every token before the restart, c's ($tc) too"

# quiet_for_a_second: Redis' clock moves on by a second or more.
quiet_for_a_second() {
        local t
        t=$(redis_ms)
        wait_for 5 sh -c "[ \$(redis-cli -s '$REDIS_SOCK' TIME | head -n 1) -gt $((t / 1000 + 1)) ]"
}
# Silence looks like a step forward: no agent called for more than half a
# lease. The tokens' clock starts again after it where it may have been at
# the last call, not where the clock key was last written: a counter that
# left Redis in between (an idle name) starts again above its last token.
emptied
TTL_MS=2000 acquire quiet-a a 5 >/dev/null
tq=$(j "$(TTL_MS=2000 acquire quiet-b b 5)" 'r[1]')
quiet_for_a_second
left_idle quiet-b
r=$(TTL_MS=2000 acquire quiet-b c 5)
is "$(j "$r" "r[1] > $tq")" true "silence: a counter that left Redis starts above its last token ($(j "$r" 'r[1]') > $tq)"
# A release on a name with no keys (a lease Redis lost) knows no lease: it
# sees no step, and moves neither the tokens' clock nor any expiry.
before=$(rcli GET "$FLEET_CLOCK")
for i in 1 2 3 4 5; do release "gone$i" x >/dev/null; done
is "$(rcli GET "$FLEET_CLOCK")" "$before" "release: of leases on names Redis lost moves no offset, and writes no time"
# Redis restarted from its own snapshot, which has the epoch in it: no agent
# knows of a reset, and the time since the snapshot looks like a step. It
# is no step of tokens (another Redis process): tokens handed out since
# the snapshot stay below the next.
snapshot before-restart "restart: a snapshot"
quiet_for_a_second
tr=$(j "$(TTL_MS=10000 acquire quiet-b d 5)" 'r[1]')      # no step: its lease is 10 s
restart_from before-restart
r=$(TTL_MS=2000 acquire quiet-b e 5)
is "$(j "$r" "r[0] == 1 and r[1] > $tr")" true \
        "restart: from a snapshot older than half a lease, the next token is above the last before it ($(j "$r" 'r[1]') > $tr)"

# Nor does it swallow a step: the next caller with a lease still sees it.
o=$(fleet_offset)
step_clock 30000
release gone6 x >/dev/null
TTL_MS=10000 acquire quiet-c a 5 >/dev/null
is "$(j "$(fleet_offset)" "r >= $o + 29000")" true "release: after a step, one that knows no lease leaves it to the next caller to see"
# A step back seen: the tokens' clock is never ahead of Redis' clock, so a
# counter that starts again after it is not either.
s1=$(j "$(TTL_MS=10000 acquire quiet-c b 5)" 'r[1]')
step_clock 0
r=$(TTL_MS=10000 acquire quiet-d a 5)
is "$(j "$r" "r[1] < $(redis_us)")" true "step back: a new counter starts on Redis' clock, not 30 s ahead ($(j "$r" 'r[1]'))"
# A step back from the right time, then the step that puts it right: the
# two take out nothing between them (chaos finding 21), so a counter lost
# after them starts above the tokens handed out before the step back.
tk=$(j "$(TTL_MS=10000 acquire back k 5)" 'r[1]')
step_clock -20000
TTL_MS=10000 acquire back-x a 5 >/dev/null
is "$(j "$(rcli GET "$FLEET_CLOCK" | awk '{ print $4 }')" "r <= -10000")" true "step back: the tokens' offset keeps it ($(rcli GET "$FLEET_CLOCK" | awk '{ print $4 }') ms)"
step_clock 0
TTL_MS=10000 acquire back-y a 5 >/dev/null
left_idle back
r=$(TTL_MS=10000 acquire back m 5)
is "$(j "$r" "r[0] == 1 and r[1] > $tk")" true \
        "step back, then put right: a counter lost after them starts above the token before them ($(j "$r" 'r[1]') > $tk)"
# A snapshot saved during a forward step, restored after it was put right:
# another Redis process, whose tokens' clock is the server's again.
step_clock 30000
TTL_MS=10000 acquire quiet-e a 5 >/dev/null
snapshot in-step "restart: a snapshot during a step"
step_clock 0
te=$(j "$(TTL_MS=10000 acquire quiet-e b 5)" 'r[1]')
restart_from in-step
left_idle quiet-e
r=$(TTL_MS=10000 acquire quiet-e c 5)
is "$(j "$r" "r[0] == 1 and r[1] > $te")" true "restart: from a snapshot saved during the step, the next token is above those after it"

# ---- Wake messages on release -------------------------------------------------
P1=00112233445566778899aabbccddeeff
P2=ffeeddccbbaa99887766554433221100
sub pub
acquire pub h 1 "$P2" >/dev/null
is "$(rec pub h 6)" - "proof: a lease granted at once keeps none"
acquire pub w 1 "$P1" >/dev/null
is "$(rec pub w 6)" "$P1" "proof: a waiter's is kept while it waits"
acquire pub w3 1 >/dev/null
r=$(status pub)
check "proof: status lists the waiters, but no proof" eval '[[ $r == *\"w3\"* && $r != *$P1* ]]'
r=$(release pub h)
msg=$(j "$r" '"g %s %d %d '"$P1"'" % (r[1], r[2], r[3])')
check "release publishes '$msg': the grant with the waiter's proof" wait_for 5 heard pub "$msg"
is "$(rec pub w 6)" - "proof: gone once used"
r=$(release pub w)
msg2=$(j "$r" '"g %s %d %d -" % (r[1], r[2], r[3])')
check "a waiter that gave no proof: '$msg2'" wait_for 5 heard pub "$msg2"
acquire pub w2 1 "$P2" >/dev/null
is "$(rec pub w2 6)" "$P2" "proof: w2 waits with its proof"
is "$(wakes pub)" "$msg"$'\n'"$msg2" "... and nothing else: no '1' for a hand-over"
is "$(release pub w2)" "[0]" "a waiter leaves the line"
check "that publishes '1' (look again)" wait_for 5 heard pub 1
is "$(rcli HEXISTS "$(key pub clock)" "$(lid w2)")" 0 "proof: gone with the waiter that left"

# ---- Redis' work a grant -------------------------------------------------------
# What the fleet shares: an uncontended acquire and its release, on a name
# Redis already holds, run 13 commands in Redis, both calls counted
# (bench/README.md; the scripts were once 38; 12 before a grant looked
# for its name in the census, one ZMSCORE: forgot.lua, census_keep()).
# Counted by Redis itself (INFO commandstats, every command but the
# test's own: redis-cli --json says HELLO first; INFO; CONFIG; and what no
# script can send, which the test's subscribers may, whenever a loaded
# machine lets them: SUBSCRIBE again after a restart, PING).
commands_run() {
        rcli INFO commandstats | tr -d '\r' |
                awk -F'[:=,]' '/^cmdstat_/ && $1 !~ /^cmdstat_(hello|info|config|subscribe|ssubscribe|psubscribe|ping)([|].*)?$/ { n += $3 } END { print n + 0 }'
}
# (A long lease: on a slow machine the fleet clock's write, due after a
# twentieth of a lease, would be one more. And the shortest lease the
# fleet clock knows (SHORT_MS, its 6th word) forgotten, so that the warm-up
# makes it this one: a gap of half the earlier checks' short lease would
# be taken for a clock step, and written.)
export TTL_MS=600000
rcli SET "$FLEET_CLOCK" "$(rcli GET "$FLEET_CLOCK" | awk '{ $6 = 0; print }')" >/dev/null
acquire work w0 1 >/dev/null
is "$(rcli GET "$FLEET_CLOCK" | awk '{ print $6 }')" "$TTL_MS" "work: the fleet clock's shortest lease is this one's"
release work w0 >/dev/null
# A grant also writes the fleet clock once TOKEN_GRAIN_MS (50 ms) after
# its last write (the tokens' clock: clocks.lua), which a slow moment
# between the warm-up and this grant makes due: one command more then,
# told by the key itself (read outside the count).
clock_before=$(rcli GET "$FLEET_CLOCK")
rcli CONFIG RESETSTAT >/dev/null
r=$(acquire work w1 1)
is "$(j "$r" "r[0]")" 1 "work: granted"
release work w1 >/dev/null
n=$(commands_run)
want=13
[ "$(rcli GET "$FLEET_CLOCK")" = "$clock_before" ] || want=14
is "$n" "$want" "an uncontended acquire and release run 13 commands in Redis, both calls counted (and the tokens' clock write, if due: $want)"
if [ "$n" != "$want" ]; then
        rcli INFO commandstats | tr -d '\r' | grep '^cmdstat_' | sed 's/^/# /'
        rcli INFO commandstats | tr -d '\r' | grep '^cmdstat_' >&2
fi
unset TTL_MS

# ---- Group commit ----------------------------------------------------------------
# Calls as the agent batches them: kind, the place of its name among the
# batch's names (KEYS: each name's keys, then the fleet clock and the
# census), number of args, args; the replies are each call's own, in
# order, as if run one after another.
# batched SCRIPT NAME=VALUE...: one call of a batch on its name number ON
# (default 1).
batched() { args "$@"; BATCH+=("$1" "${ON:-1}" "${#ARGS_OUT[@]}" "${ARGS_OUT[@]}"); }
A() {
        batched acquire lease="$1" slots="$2" ttl_ms=10000 description="job-$1" host=a uid=1000 grace_until_ms=0 \
                idle_ms=600000 weight=1 hold=0 proof="$P1"
}
R() { batched release lease="$1" host=a uid=1000 grace_until_ms=0 idle_ms=600000; }
# lua_names "NAME..." SCRIPT ARGV...: a script on several names' keys.
lua_names() {
        local names=$1 script=$2 k n
        shift 2
        mapfile -t k < <(for n in $names; do keys_of "$n"; done; echo "$FLEET_CLOCK"; echo "$CENSUS")
        rcli --json FCALL "${FN[$script]}" "${#k[@]}" "${k[@]}" "$@" | unlid
}
BATCH=()
A b1 1; A b2 1; A b3 1; R b1
batched renew ttl_ms=10000 host=a grace_until_ms=0 idle_ms=600000 leases=b2
r=$(lua bat batch "${BATCH[@]}")
is "$(j "$r" 'len(r)')" 5 "batch: one reply per call"
is "$(j "$r" '[r[0][0], r[1][:2], r[2][:2]]')" "[1,[0,1],[0,2]]" "batch: b1 gets in, b2 and b3 queue in order"
is "$(j "$r" 'r[3][:2]')" '[1,"b2"]' "batch: b1's release hands the slot to b2 in the same call"
is "$(j "$r" 'r[4]')" "[0]" "batch: b2's renewal finds it held"
is "$(j "$(status bat)" '[h[0] for h in r[1]] + [q[0] for q in r[2]]')" '["b2","b3"]' "batch: Redis has what the calls did"
is "$(counted bat)" "1 1 / 1 1 2" "batch: counted right"
# An agent that restarted adopts its leases in batches too.
BATCH=()
for l in b2 b3 nobody; do batched adopt lease=$l ttl_ms=10000 host=a uid=1000 grace_until_ms=0 idle_ms=0; done
r=$(lua bat batch "${BATCH[@]}")
is "$(j "$r" '[r[0][0], r[1], r[2]]')" "[1,[0],[-1]]" "batch: adopt finds b2 holding, b3 queued, an unknown lease gone"
BATCH=()
A b4 1
r=$(lua bat batch "${BATCH[@]}" acquire 1 3 b5 1 10000 2>&1)
like "$r" "call 2 \(acquire\) of batch takes 10 to 11 arguments, not 3" "batch: a malformed batch is refused ($r)"
is "$(rcli ZSCORE "$(key bat queue)" "$(lid b4)")" "" "batch: ... and none of its calls ran"
# keep: a batch of renewals and releases alone, which Redis runs when it
# is full; a call of another kind makes it malformed, and nothing runs.
BATCH=()
A k1 1
r=$(lua kp batch "${BATCH[@]}")
is "$(j "$r" 'r[0][0]')" 1 "keep: k1 holds"
BATCH=()
batched renew ttl_ms=10000 host=a grace_until_ms=0 idle_ms=600000 leases=k1
R k1
r=$(lua kp keep "${BATCH[@]}")
is "$(j "$r" '[r[0], r[1][0]]')" "[[0],1]" "keep: k1 renewed, then released"
BATCH=()
R k1; A k2 1
r=$(lua kp keep "${BATCH[@]}" 2>&1)
like "$r" "malformed call at argument 9" "keep: an acquire in it is refused ($r)"
is "$(rcli HEXISTS "$(key kp clock)" "$(lid k2)")" 0 "keep: ... and none of its calls ran"
# Which functions Redis runs when it is full (past maxmemory): those that
# grow nothing there.
flags=$(rcli FUNCTION LIST LIBRARYNAME fleetsem | tr -d '\r' | awk '
        $0 == "name" { getline; name = $0 } $0 == "flags" { getline; if (name != "" && $0 == "allow-oom") print name }' |
        sed 's/_v[0-9]*$//' | sort | tr '\n' ' ')
is "$flags" "fleetsem_counts fleetsem_keep fleetsem_release fleetsem_renew fleetsem_status " \
        "allow-oom: renew, release, keep, status and counts alone"
# A batch spans names (one Redis; in a Cluster those of one hash slot):
# each call says which, and its name's calls, in any interleaving, answer
# and write as that many separate calls would, the name's state written
# before the next name's calls.
BATCH=()
ON=1 A x1 1; ON=2 A y1 1; ON=1 A x2 1; ON=2 A y2 1; ON=1 R x1
ON=3 batched adopt lease=z0 ttl_ms=10000 host=a uid=1000 grace_until_ms=0 idle_ms=0
r=$(lua_names "mb1 mb2 mb3" batch "${BATCH[@]}")
is "$(j "$r" '[r[0][0], r[1][0], r[2][:4], r[3][:4], r[4][:2], r[5]]')" '[1,1,[0,1,1,1],[0,1,1,1],[1,"x2"],[-1]]' \
        "batch of names: each call answered on its own name, in order"
is "$(j "$r" 'r[4][2] > r[0][1] and r[4][3] >= r[0][2]')" true "batch of names: ... x2 gets a token after x1's"
is "$(rec mb1 x2 4)" "$(j "$r" 'r[4][2]')" "batch of names: mb1's hash has x2's token"
is "$(counted mb1) | $(counted mb2)" "1 0 / 1 0 1 | 1 1 / 1 1 2" "batch of names: each name counted right"
is "$(rcli ZSCORE "$CENSUS" 'fleetsem:{mb1}') $(rcli ZSCORE "$CENSUS" 'fleetsem:{mb2}')" \
        "$(state mb1 9) $(state mb2 9)" "batch of names: the census knows when each name leaves"
like "$(state mb1 9) $(state mb2 9)" '^[1-9][0-9]* [1-9][0-9]*$' "batch of names: ... a time for each"
is "$(rcli PEXPIRETIME "$(key mb1 clock)") $(rcli PEXPIRETIME "$(key mb2 holders)")" "$(state mb1 9) $(state mb2 9)" \
        "batch of names: ... and so do their keys"
BATCH=()
ON=1 A x3 1; ON=3 A z1 1
r=$(lua_names "mb1 mb2" batch "${BATCH[@]}" 2>&1)
like "$r" "malformed call" "batch of names: a call on a name the batch has not is refused ($r)"
is "$(rcli HEXISTS "$(key mb1 clock)" "$(lid x3)")" 0 "batch of names: ... and none of its calls ran"
BATCH=()
ON=1 A x3 1; ON=0 A x3 1
r=$(lua_names "mb1 mb2" batch "${BATCH[@]}" 2>&1)
like "$r" "malformed call" "batch of names: ... so is one on name 0"
BATCH=()
A x3 1; A x4 1
mapfile -t k < <(keys_of mb1; echo "fleetsem:{mb1}:x"; echo "$FLEET_CLOCK"; echo "$CENSUS")
r=$(rcli --json FCALL "${FN[batch]}" "${#k[@]}" "${k[@]}" "${BATCH[@]}" 2>&1)
like "$r" "batch takes the runs of keys of a name then 2, not 7 keys" "batch of names: keys that are not whole names' are refused ($r)"
is "$(rcli HEXISTS "$(key mb1 clock)" "$(lid x3)")" 0 "batch of names: ... and nothing ran"
# After a reset an agent puts all its holders back in one batch: each
# re-assertion answered as reassert.lua alone would (1 held, 0 lost, -1
# another's), on its own name, and Redis counts them.
BATCH=()
ON=1 batched reassert lease=ra1 slots=1 token=7 since_ms=1234 ttl_ms=10000 description="back ra1" host=a uid=1000 \
        grace_until_ms=0 idle_ms=600000 weight=1 hold=0
ON=1 batched reassert lease=ra2 slots=1 token=8 since_ms=1234 ttl_ms=10000 description="back ra2" host=a uid=1000 \
        grace_until_ms=0 idle_ms=600000 weight=1 hold=0
ON=2 batched reassert lease=rb1 slots=2 token=9 since_ms=1234 ttl_ms=10000 description="back rb1" host=a uid=1000 \
        grace_until_ms=0 idle_ms=600000 weight=1 hold=0
ON=1 batched reassert lease=ra1 slots=1 token=7 since_ms=1234 ttl_ms=10000 description="back ra1" host=b uid=1000 \
        grace_until_ms=0 idle_ms=600000 weight=1 hold=0
r=$(lua_names "rbat1 rbat2" batch "${BATCH[@]}")
is "$r" '[1,0,1,-1]' "batch of reasserts: held, lost (the limit is 1), held on the other name, another host's refused"
is "$(rcli ZRANGE "$(key rbat1 holders)" 0 -1 | unlid) $(rcli ZRANGE "$(key rbat2 holders)" 0 -1 | unlid)" "ra1 rb1" \
        "batch of reasserts: Redis holds what they put back"
is "$(rec rbat1 ra1 4) $(rec rbat2 rb1 4)" "7 9" "batch of reasserts: ... with their tokens"
is "$(counted rbat1) | $(counted rbat2)" "1 0 / 1 0 1 | 1 0 / 1 0 1" "batch of reasserts: each name counted right"

# ---- Epoch ---------------------------------------------------------------------
t0=$(redis_ms)
e1=$(epoch 0123456789abcdef0123456789abcdef 5000)
is "$(j "$e1" 'r[0]')" 1 "epoch: the first call creates it"
like "$(j "$e1" 'r[1]')" '^0123456789abcdef0123456789abcdef [0-9]+$' "epoch: value 'ID GRACE_UNTIL_MS'"
is "$(j "$e1" "$t0 + 5000 <= int(r[1].split()[1]) <= $(redis_ms) + 5000")" true "epoch: grace until now + 5000 ms"
e2=$(epoch fedcba9876543210fedcba9876543210 5000)
is "$(j "$e2" '[r[0], r[1]]')" "$(j "$e1" '[0, r[1]]')" "epoch: the second call finds the same value"
is "$(j "$e2" "$t0 <= r[2] <= $(redis_ms)")" true "epoch: with Redis' time in ms"
is "$(rcli PTTL "$EPOCH_KEY")" -1 "epoch: the key never expires"
emptied
e3=$(epoch 00000000000000000000000000000003 5000)
is "$(j "$e3" '[r[0], r[1].split()[0]]')" '[1,"00000000000000000000000000000003"]' "epoch: after FLUSHALL a new one"
emptied
e4=$(epoch 00000000000000000000000000000004 5000 aaaa 500)
is "$(j "$e4" 'r[0]')" 1 "epoch: with a master's run id, the first call creates it"
like "$(j "$e4" 'r[1]')" '^00000000000000000000000000000004 [0-9]+ aaaa$' "epoch: ... naming that master"
e5=$(epoch 00000000000000000000000000000005 5000 aaaa 500)
is "$(j "$e5" '[r[0], r[1]]')" "$(j "$e4" '[0, r[1]]')" "epoch: the same master finds it"
t0=$(redis_ms)
e6=$(epoch 00000000000000000000000000000006 100 bbbb 3000)
is "$(j "$e6" '[r[0], r[1].split()[0], r[1].split()[2]]')" '[2,"00000000000000000000000000000006","bbbb"]' \
        "epoch: another master (a failover) replaces it, and says so"
is "$(j "$e6" "$t0 + 3000 <= int(r[1].split()[1]) <= $(redis_ms) + 3000")" true "epoch: ... with the longer grace"
# The same process with a new replication id and no history (a master
# creates its backlog for its first replica, or drops it): no failover.
# Without that word (a promotion keeps the id it followed as its history)
# the same run id with another replication id is one.
RUN=$(printf 'r%.0s' $(seq 40) | tr r 1) R1=$(printf '2%.0s' $(seq 40)) R2=$(printf '3%.0s' $(seq 40)) R3=$(printf '4%.0s' $(seq 40))
emptied
e7=$(epoch 00000000000000000000000000000007 0 "$RUN$R1" 3000)
fresh_epoch() {    # ID MASTER_ID FRESH: as the agent calls it, knowing none
        args epoch id="$1" grace_ms=0 master_id="$2" failover_grace_ms=3000 known_id= known_grace_until_ms= replid_fresh="$3"
        rcli --json FCALL "${FN[epoch]}" 1 "$EPOCH_KEY" "${ARGS_OUT[@]}"
}
e8=$(fresh_epoch 00000000000000000000000000000008 "$RUN$R2" 1)
is "$(j "$e8" '[r[0], r[1].split()[0], r[1].split()[1] == "'"$(j "$e7" 'r[1].split()[1]')"'"]')" \
        '[0,"00000000000000000000000000000007",true]' "epoch: a new replication id without history: the same epoch, its grace as it was"
is "$(rcli GET "$EPOCH_KEY" | cut -d' ' -f3)" "$RUN$R2" "epoch: ... naming the master as it is now"
e9=$(fresh_epoch 00000000000000000000000000000009 "$RUN$R3" 0)
is "$(j "$e9" '[r[0], r[1].split()[0]]')" '[2,"00000000000000000000000000000009"]' \
        "epoch: a new replication id with a history (a promotion), the same run id: a failover, a new epoch"
e10=$(fresh_epoch 00000000000000000000000000000010 "$(printf '5%.0s' $(seq 40))$R1" 1)
is "$(j "$e10" 'r[0]')" 2 "epoch: another run id is another master, history or none"

# A failover that flaps back to a master that never caught up (chaos
# finding 9): the same Redis process, its run id and its epoch come back
# with data older than an epoch the agents knew, and the time since that
# data was written looks like a clock step within one process. The agents
# pass the epoch they knew: older data is a reset (a new epoch and grace),
# and the next token is above every token of the lost state.
# keep_state / back_to_kept: this Redis' data copied aside (database 1)
# and back, the same process.
keep_state() { rcli -n 1 FLUSHDB >/dev/null; local k; for k in $(rcli KEYS '*'); do rcli COPY "$k" "$k" DB 1 >/dev/null; done; }
back_to_kept() { rcli FLUSHDB >/dev/null; local k; for k in $(rcli -n 1 KEYS '*'); do rcli -n 1 COPY "$k" "$k" DB 0 >/dev/null; done; }
epoch_knowing() {  # ID KNOWN_ID KNOWN_GRACE_UNTIL_MS: as a standalone agent calls it, grace 0
        args epoch id="$1" grace_ms=0 master_id= failover_grace_ms=0 known_id="$2" known_grace_until_ms="$3"
        rcli --json FCALL "${FN[epoch]}" 1 "$EPOCH_KEY" "${ARGS_OUT[@]}"
}
until_of() { j "$1" 'r[1].split()[1]'; }
emptied
ea=$(epoch_knowing aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa "" "")
ga=$(until_of "$ea")
TTL_MS=1000 GRACE=$ga acquire flap h1 5 >/dev/null
quiet_for_a_second                           # a silence: its tokens' offset grows by it
TTL_MS=1000 GRACE=$ga acquire flap h0 5 >/dev/null
is "$(rcli GET "$FLEET_CLOCK" | awk '{ print ($4 >= 900) }')" 1 "flapping failover: the first master's tokens' offset grew by the silence"
keep_state                                   # the master that stops following
rcli FLUSHDB >/dev/null                      # the other one takes over and lost it
quiet_for_a_second
eb=$(epoch_knowing bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa "$ga")
gb=$(until_of "$eb")
is "$(j "$eb" 'r[0]')" 1 "flapping failover: the master that took over lost the epoch: a new one"
tb=$(j "$(TTL_MS=1000 GRACE=$gb acquire flap h2 5)" 'r[1]')
r=$(epoch_knowing cccccccccccccccccccccccccccccccc aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa "$ga")
is "$(j "$r" '[r[0], r[1].split()[0]]')" '[0,"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"]' \
        "flapping failover: an agent that knew an older epoch finds the newer one holding (no new reset)"
back_to_kept                                 # the first master is back, its old data with it
t0=$(redis_ms)
r=$(epoch_knowing dddddddddddddddddddddddddddddddd bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb "$gb")
is "$(j "$r" '[r[0], r[1].split()[0]]')" '[3,"dddddddddddddddddddddddddddddddd"]' \
        "flapping failover: an epoch older than the one the agent knew is a reset, and says so"
gd=$(until_of "$r")
is "$(j "$gd" "r >= $t0")" true "flapping failover: ... whose grace ends no earlier than Redis' time now"
r=$(TTL_MS=1000 GRACE=$gd acquire flap h3 5)
is "$(j "$r" "r[0] == 1 and r[1] > $tb")" true \
        "flapping failover: the next token is above those of the lost state ($(j "$r" 'r[1]') > $tb)"
r=$(epoch_knowing eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee "" "")
is "$(j "$r" '[r[0], r[1].split()[0]]')" '[0,"dddddddddddddddddddddddddddddddd"]' \
        "flapping failover: a fresh agent (no epoch known) finds the new one"
rcli -n 1 FLUSHDB >/dev/null
# A Redis declared empty (fleetsem redis-init: an epoch whose grace ended,
# 0) replaced by another declared so, under agents that knew the first:
# their data went, and the grace keeps their holders' slots.
emptied
rcli SET "$EPOCH_KEY" "ffffffffffffffffffffffffffffffff 0" >/dev/null
r=$(epoch_knowing 99999999999999999999999999999999 11111111111111111111111111111111 0)
is "$(j "$r" '[r[0], r[1].split()[0]]')" '[3,"99999999999999999999999999999999"]' \
        "a declared-empty epoch not the one the agent knew (declared empty too) is a reset"
r=$(epoch_knowing 88888888888888888888888888888888 "" "")
is "$(j "$r" '[r[0], r[1].split()[0]]')" '[0,"99999999999999999999999999999999"]' \
        "... which an agent that knew none finds holding"

# The data model marker beside the epoch (P:model, "N V"), read and
# written by the epoch script at connect: an agent of model 2 writes its
# own where there is none or an older one, and refuses a newer one or one
# it cannot read ({4, marker}), leaving both keys as they were.
MODEL_KEY=fleetsem:model
epoch_model() {    # ID: as a standalone agent of data model 2 calls it
        args epoch id="$1" grace_ms=0 master_id= failover_grace_ms=0 known_id= known_grace_until_ms= replid_fresh=0 \
                model="2 0.2"
        rcli --json FCALL "${FN[epoch]}" 2 "$EPOCH_KEY" "$MODEL_KEY" "${ARGS_OUT[@]}"
}
emptied
r=$(epoch_model 0000000000000000000000000000000a)
is "$(j "$r" 'r[0]')" 1 "model: the first agent makes the epoch ..."
is "$(rcli GET "$MODEL_KEY")" "2 0.2" "model: ... and the marker, 'N V'"
rcli SET "$MODEL_KEY" "1 0.1" >/dev/null
r=$(epoch_model 0000000000000000000000000000000b)
is "$(j "$r" '[r[0], r[1].split()[0]]')" '[0,"0000000000000000000000000000000a"]' "model: an older marker: the epoch holds ..."
is "$(rcli GET "$MODEL_KEY")" "2 0.2" "model: ... and the marker is this model's"
was=$(rcli GET "$EPOCH_KEY")
for m in "99 9.9" "3x" "" "3 0.3 more"; do
        rcli SET "$MODEL_KEY" "$m" >/dev/null
        r=$(epoch_model 0000000000000000000000000000000c)
        is "$(j "$r" 'r[:2]')" "[4,\"$m\"]" "model: marker '$m' (newer, or unreadable): refused, and said"
        is "$(rcli GET "$MODEL_KEY") / $(rcli GET "$EPOCH_KEY")" "$m / $was" "model: ... the marker and the epoch left alone"
done
rcli SET "$MODEL_KEY" "99 9.9" >/dev/null
r=$(epoch 0000000000000000000000000000000d 0)
is "$(j "$r" 'r[0]')" 0 "model: a caller that passes no marker key is not asked"

# An epoch that follows its master's first hash slot after a resharding
# (follow.lua): compare-and-set, so that an agent that read an older epoch
# never puts it back over a newer one of the same master.
FKEY='fleetsem:epoch:{x}' FMKEY='fleetsem:model:{x}'
follow() {         # VALUE [MARKER]
        args follow value="$1" model="${2:-2 0.2}"
        rcli FCALL "${FN[follow]}" 2 "$FKEY" "$FMKEY" "${ARGS_OUT[@]}"
}
emptied
old="aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa 2000 $RUN$R1" new="bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb 5000 $RUN$R2"
is "$(follow "$old")" 1 "follow: none there: written"
is "$(rcli GET "$FKEY") / $(rcli GET "$FMKEY")" "$old / 2 0.2" "follow: ... the epoch and the marker"
rcli SET "$FKEY" "$new" >/dev/null
is "$(follow "$old")" 0 "follow: a newer epoch of the same master there: not written"
is "$(rcli GET "$FKEY")" "$new" "follow: ... the epoch did not go back"
is "$(follow "${new/5000/4999}")" 0 "follow: ... nor for an older grace by a millisecond"
is "$(follow "$new")" 0 "follow: the same epoch: nothing to write"
other="cccccccccccccccccccccccccccccccc 9000 $(printf '5%.0s' $(seq 40))$R1"
rcli SET "$FKEY" "$other" >/dev/null
is "$(follow "$old")" 1 "follow: another master's epoch (moved here with its slot): replaced"
is "$(rcli GET "$FKEY")" "$old" "follow: ... by this master's"
is "$(follow "$new")" 1 "follow: an older epoch of the same master: replaced by the newer"
rcli SET "$FMKEY" "3 0.3" >/dev/null
follow "$new" >/dev/null
is "$(rcli GET "$FMKEY")" "3 0.3" "follow: a newer marker there stays"
rcli SET "$FMKEY" "1 0.1" >/dev/null
follow "$new" >/dev/null
is "$(rcli GET "$FMKEY")" "2 0.2" "follow: an older one becomes this model's"
like "$(follow "not an epoch" 2>&1)" 'not an epoch' "follow: a malformed value is refused"
is "$(rcli GET "$FKEY")" "$new" "follow: ... and nothing written"

# ---- The name's state --------------------------------------------------------------
# Many leases of one agent on one name: one renewal, read and written a
# few thousand at a time.
BATCH=()
for i in $(seq 1 4500); do batched acquire lease="m$i" slots=5000 ttl_ms=10000 description=- host=a uid=1000 \
        grace_until_ms=0 idle_ms=600000 weight=1 hold=0; done
is "$(lua many batch "${BATCH[@]}" | grep -o '\[1,' | wc -l)" 4500 "many: 4500 grants in one batch"
leases=(); for i in $(seq 1 4500); do leases+=("m$i"); done
is "$(renew many "${leases[@]}" gone1 gone2)" '[0,"gone1","gone2"]' "many: one renewal of 4502 leases extends 4500"
is "$(counted many)" "4500 0 / 4500 0 4500" "many: counted right"
# A holder's entry removed by hand (as eviction would): its renewal says it
# is missing and that Redis forgot the name (for a lease), the counts
# follow the ZSETs again, and nobody gets in until the holder is back.
acquire gone-by-hand h 1 >/dev/null
acquire gone-by-hand h2 2 >/dev/null
rcli ZREM "$(key gone-by-hand holders)" "$(lid h)" >/dev/null
r=$(renew gone-by-hand h h2)
is "$(j "$r" 'r[1:]')" '["h"]' "lost entry: a holder removed by hand is missing at its renewal"
is "$(j "$r" '0 < r[0] <= 10000')" true "lost entry: ... and the name grants nothing for a lease ($(j "$r" 'r[0]') ms)"
is "$(counted gone-by-hand)" "0 1 / 0 1 1" "lost entry: its record went, the counts are the ZSETs'"
r=$(acquire gone-by-hand h2 2)
is "$(j "$r" 'r[0]')" 0 "lost entry: so the waiter behind it still waits"
is "$(j "$r" '0 < r[4] <= 10000')" true "lost entry: ... told to look again when that lease is over"
is "$(reassert gone-by-hand h 1 5 1234)" 1 "lost entry: its agent puts the holder back meanwhile"
is "$(counted gone-by-hand)" "1 1 / 1 1 2" "lost entry: ... counted again"
# ---- Global keys lost alone: the fleet clock, the census, a record -----------
# The fleet clock key lost after its offset gathered a silence (or a step):
# a new clock, never offset 0 of the old one; the name's expiries do not
# move back by the offset (they would all have run out: w granted beside h).
emptied
TTL_MS=10000 acquire gk h 1 >/dev/null
TTL_MS=10000 acquire gk w 1 >/dev/null
tok=$(rec gk h 4)
t=$(redis_ms)
fleet_is $((t - 20000))         # nothing ran for 20 s: the offset gathers 20 s
TTL_MS=10000 renew gk h >/dev/null
is "$(j "$(fleet_offset)" 'r >= 19000')" true "fleet clock lost: first, an offset of 20 s gathered ($(fleet_offset))"
id0=$(fleet_id)
rcli DEL "$FLEET_CLOCK" >/dev/null
r=$(TTL_MS=10000 acquire gk w 1)
is "$(j "$r" 'r[:2]')" "[0,1]" "fleet clock lost: h still holds, w waits"
is "$(j "$(rcli ZSCORE "$(key gk holders)" "$(lid h)")" "r >= $t + 8000")" true "fleet clock lost: h's expiry did not move back"
is "$(fleet_offset) $(state gk 10)" "0 $(fleet_id)" "fleet clock lost: a new clock at offset 0, the name on it"
is "$(j "$(fleet_id)" "r != $id0")" true "fleet clock lost: ... with a new id"
left_idle gk
is "$(j "$(TTL_MS=10000 acquire gk2 a 1)" "r[1] > $tok")" true "fleet clock lost: tokens do not go back"
# A name nobody called since the key was lost: a gap (or a step) may have
# gone unseen, so what would run out within a lease gets one from now.
TTL_MS=10000 acquire gk3 h 1 >/dev/null
rcli DEL "$FLEET_CLOCK" >/dev/null
TTL_MS=10000 acquire gk2 b 1 >/dev/null      # another name makes the new clock
t=$(redis_ms)
rcli ZADD "$(key gk3 holders)" $((t - 1000)) "$(lid h)" >/dev/null
is "$(j "$(TTL_MS=10000 acquire gk3 w 1)" 'r[:2]')" "[0,1]" \
        "fleet clock lost: a name from before it keeps its holder, whose time ran out unseen"
is "$(j "$(rcli ZSCORE "$(key gk3 holders)" "$(lid h)")" "r >= $t + 9000")" true "fleet clock lost: ... given a lease from now"
# A step of Redis' clock, seen, then the key lost: the same.
TTL_MS=10000 acquire gk4 h 1 >/dev/null
step_clock 30000
TTL_MS=10000 renew gk4 h >/dev/null
is "$(j "$(fleet_offset)" 'r >= 29000')" true "fleet clock lost after a step: the step seen ($(fleet_offset))"
rcli DEL "$FLEET_CLOCK" >/dev/null
is "$(j "$(TTL_MS=10000 acquire gk4 w 1)" 'r[:2]')" "[0,1]" "fleet clock lost after a step: h still holds, w waits"
step_clock 0
is "$(j "$(TTL_MS=10000 acquire gk4 w 1)" 'r[:2]')" "[0,1]" "fleet clock lost after a step: ... also once the clock is put right"
is "$(j "$(rcli ZSCORE "$(key gk4 holders)" "$(lid h)")" "r >= $(redis_ms) + 5000")" true \
        "fleet clock lost after a step: ... h's time left taken off the step back, not more"
# The census lost, made again by a call on another name: the held name's
# entry is written again by its next call, so that a loss of its keys
# later still counts as a loss (w waits, not granted beside h).
emptied
TTL_MS=10000 acquire cz h 1 >/dev/null
rcli DEL "$CENSUS" >/dev/null
TTL_MS=10000 acquire cz-other o 1 >/dev/null
is "$(rcli ZSCORE "$CENSUS" 'fleetsem:{cz}')" "" "census lost: the held name is not in the new census..."
TTL_MS=10000 renew cz h >/dev/null
is "$(j "$(rcli ZSCORE "$CENSUS" 'fleetsem:{cz}')" "r > $(redis_ms)")" true "census lost: ... until its next renewal"
t=$(redis_ms)
rcli ZADD "$CENSUS" $((20000 - t)) . >/dev/null     # the new census older than a lease
rcli DEL "$(key cz holders)" "$(key cz queue)" "$(key cz waiters)" "$(key cz clock)" >/dev/null
r=$(TTL_MS=10000 acquire cz w 1)
is "$(j "$r" 'r[0]')" 0 "census lost, then the name's keys: w is not granted (the name was forgotten)"
is "$(j "$r" '0 < r[5] <= 10000')" true "census lost, then the name's keys: ... for a lease"
# A census 8 s old (of a 10-s lease) that lacks a name whose keys went:
# forgotten now, a whole lease of grace, not the 2 s left of the census'
# first lease (its holder's agent, which renewed since, would take its
# slot for lost rather than put it back).
TTL_MS=10000 acquire cz2 h 1 >/dev/null
t=$(redis_ms)
rcli ZADD "$CENSUS" $((8000 - t)) . >/dev/null
rcli ZREM "$CENSUS" 'fleetsem:{cz2}' >/dev/null
rcli DEL "$(key cz2 holders)" "$(key cz2 queue)" "$(key cz2 waiters)" "$(key cz2 clock)" >/dev/null
r=$(TTL_MS=10000 renew cz2 h)
is "$(j "$r" 'r[0] > 9000')" true "census young, a name's keys lost: a whole lease of grace from now ($(j "$r" 'r[0]') ms)"
# The census lost with nobody's call in between: the held name's own call
# makes it again, with its entry.
rcli DEL "$CENSUS" >/dev/null
TTL_MS=10000 renew cz-other o >/dev/null
is "$(j "$(rcli --json ZMSCORE "$CENSUS" 'fleetsem:{cz-other}' .)" 'r[0] is not None and r[1] is not None')" true \
        "census lost: a held name's renewal makes it again, with its entry and mark"
rcli ZADD "$CENSUS" -1 . >/dev/null     # (seeded again: the names below are new)
# A name the census lost that then goes a lease with no renewal (nobody
# held or waited), is granted, and loses its keys before its holder's
# first renewal: the grant wrote its entry back, so the next call finds
# it forgotten and grants nothing beside the holder. The same for a slot
# handed over by a release.
for how in acquire release; do
        n=cq-$how
        TTL_MS=10000 acquire "$n" x 1 >/dev/null
        [ $how = release ] && TTL_MS=10000 acquire "$n" h 1 >/dev/null
        rcli DEL "$CENSUS" >/dev/null
        TTL_MS=10000 acquire "cq-other-$how" o 1 >/dev/null
        t=$(redis_ms)
        rcli ZADD "$CENSUS" $((20000 - t)) . >/dev/null     # a lease of quiet since
        is "$(rcli ZSCORE "$CENSUS" "fleetsem:{$n}")" "" "census lost, a lease quiet ($how): the name is not in it..."
        if [ $how = acquire ]; then
                TTL_MS=10000 release "$n" x >/dev/null
                r=$(TTL_MS=10000 acquire "$n" h 1)
        else
                r=$(TTL_MS=10000 release "$n" x)
                r=$(j "$r" '[1 if r[1:2] == ["h"] else 0]')     # h handed the slot
        fi
        is "$(j "$r" 'r[0]')" 1 "census lost, a lease quiet ($how): ... h is granted"
        is "$(j "[$(rcli ZSCORE "$CENSUS" "fleetsem:{$n}")]" "r[:1] > [$(redis_ms)]")" true \
                "census lost, a lease quiet ($how): ... and the grant wrote the name's entry back"
        rcli DEL "$(key "$n" holders)" "$(key "$n" queue)" "$(key "$n" waiters)" "$(key "$n" clock)" >/dev/null
        r=$(TTL_MS=10000 acquire "$n" w 1)
        is "$(j "$r" '[r[0], len(r) > 5 and 0 < r[5] <= 10000]')" "[0,true]" \
                "census lost, a lease quiet, granted, then the name's keys ($how): w is not granted beside h"
done
# One holder's record lost (HDEL of its field), its entry still there: its
# renewal says the name was forgotten, so its agent puts it back.
acquire hd h 1 >/dev/null
acquire hd w 1 >/dev/null
tok=$(rec hd h 4)
rcli HDEL "$(key hd clock)" "$(lid h)" >/dev/null
r=$(renew hd h w)
is "$(j "$r" 'r[1:]')" '["h"]' "record lost: the holder is missing at its renewal"
is "$(j "$r" '0 < r[0] <= 10000')" true "record lost: ... and the name grants nothing for a lease ($(j "$r" 'r[0]') ms): put back, not lost"
is "$(j "$(acquire hd w 1)" 'r[0]')" 0 "record lost: the waiter still waits"
is "$(reassert hd h 1 "$tok" 1)" 1 "record lost: its agent puts the holder back"
is "$(rec hd h 4) $(counted hd)" "$tok 1 1 / 1 1 2" "record lost: ... with its token, counted once"
# The same losses found by an adoption (the holder's agent restarted
# before a renewal): forgotten, not gone, so that its agent puts the
# holder back; a release still reads gone.
acquire ad h 1 >/dev/null
acquire ad w 1 >/dev/null
tok=$(rec ad h 4) since=$(rec ad h 5)
rcli ZREM "$(key ad holders)" "$(lid h)" >/dev/null
is "$(adopt ad h)" "[2,$tok,$since,\"INFO lease=h\"]" "adopt, entry lost: forgotten, with the record's token, since and description"
is "$(j "$(acquire ad w 1)" '[r[0], 0 < r[5] <= 10000]')" "[0,true]" "adopt, entry lost: ... and the name grants nothing for a lease"
is "$(reassert ad h 1 "$tok" "$since")" 1 "adopt, entry lost: its agent puts the holder back"
is "$(rec ad h 4) $(counted ad)" "$tok 1 1 / 1 1 2" "adopt, entry lost: ... with its token, counted once"
rcli HDEL "$(key ad clock)" "$(lid h)" >/dev/null
r=$(adopt ad h)
is "$(j "$r" "[r[0], r[1] > $tok, r[3]]")" '[2,true,""]' \
        "adopt, record lost: forgotten, with a new token above the name's, no description"
tok2=$(j "$r" 'r[1]')
is "$(state ad 5)" "$tok2" "adopt, record lost: ... the name's last token"
is "$(j "$(acquire ad w 1)" 'r[0]')" 0 "adopt, record lost: ... the waiter still waits"
is "$(reassert ad h 1 "$tok2" "$(j "$r" 'r[2]')")" 1 "adopt, record lost: its agent puts the holder back"
is "$(rec ad h 4) $(counted ad)" "$tok2 1 1 / 1 1 2" "adopt, record lost: ... with the new token, counted once"
rcli DEL "$(key ad clock)" >/dev/null
is "$(j "$(adopt ad h)" "[r[0], r[1] > $tok2]")" '[2,true]' "adopt, the name's hash lost: forgotten, with a new token"
is "$(adopt ad w)" "[-1]" "adopt, the name's hash lost: a waiter (neither record nor entry) is gone"
is "$(reassert ad h 1 "$tok2" 1)" 1 "adopt, the name's hash lost: its agent puts the holder back"
release ad h >/dev/null
is "$(adopt ad h)" "[-1]" "adopt: a holder released is gone, in the lease after the name was forgotten too"
# The census expires with its latest entry, when its names' keys have all
# left, and the fleet's clock key keeps that time (its 8th word): found
# missing from then on, it left with its names (a new name is granted at
# once); found missing before, it was lost (a name without its state is
# forgotten).
emptied
IDLE=1500 acquire ce h 1 >/dev/null
IDLE=1500 release ce h >/dev/null
top=$(rcli ZRANGE "$CENSUS" -1 -1 WITHSCORES | tail -n 1)
is "$(rcli GET "$FLEET_CLOCK" | awk '{ print $8 }')" "$top" "census: the clock key says when it expires, its latest entry's time"
like "$(rcli PTTL "$CENSUS")" '^[1-9][0-9]*$' "census: ... and it expires"
check "census: it leaves with its last name" wait_for 10 sh -c "[ \"\$(redis-cli -s '$REDIS_SOCK' EXISTS '$CENSUS' \
        'fleetsem:{ce}:clock')\" = 0 ]"
is "$(j "$(acquire ce2 n 1)" 'r[0]')" 1 "census left with its names: a new name is granted at once"
is "$(rcli ZSCORE "$CENSUS" .)" -1 "census left with its names: ... made again as a seeded one"
acquire ce3 h 1 >/dev/null
rcli DEL "$CENSUS" >/dev/null
rcli DEL "$(key ce3 holders)" "$(key ce3 queue)" "$(key ce3 waiters)" "$(key ce3 clock)" >/dev/null
r=$(acquire ce3 w 1)
is "$(j "$r" '[r[0], 0 < r[5] <= 10000]')" "[0,true]" "census lost before its time, then a name's keys: forgotten, not new"
acquire ce4 h 1 >/dev/null
fleet_limit ce4 1 >/dev/null
is "$(rcli PTTL "$CENSUS") $(rcli GET "$FLEET_CLOCK" | awk '{ print $8 }')" "-1 0" \
        "census: an entry that never leaves (a fleet limit): it never expires, and the clock key says so"
fleet_limit ce4 0 >/dev/null
rcli ZADD "$CENSUS" -1 . >/dev/null     # (seeded again)

# A lease named as the state's field is refused (the agent never sends one).
like "$(lua dot acquire . 1 10000 x a 1000 0 600000 1 0 2>&1)" "ERR fleetsem: argument 1 \(lease\) of acquire: not a lease id" \
        "state: a lease named '.' is refused"
is "$(rcli HGET "$(key dot clock)" .)" "" "... and writes nothing"
# The first data model's keys: a name whose `clock` is a string that an
# agent of it wrote within two of its leases is refused, by name; after
# that, the name starts again (its dead holders gone).
t=$(redis_ms)
rcli SET "$(key old1 clock)" "$((t - 5000)) 10000 0" >/dev/null
rcli ZADD "$(key old1 holders)" $((t + 5000)) "$(lid oldlease)" >/dev/null
r=$(acquire old1 n 1 2>&1)
like "$r" "FLEETSEM fleetsem:\\{old1\\}:clock is of data model 1 \\(fleetsem 0\\.1\\).*this agent speaks data model 2 \\(fleetsem >= 0\\.2\\)" "first model: a name an earlier agent uses is refused: $r"
is "$(rcli TYPE "$(key old1 clock)") $(rcli ZCARD "$(key old1 holders)")" "string 1" "... and left as it was"
rcli SET "$(key old1 clock)" "$((t - 25000)) 10000 0" >/dev/null
r=$(acquire old1 n 1)
is "$(j "$r" 'r[:1]')" "[1]" "first model: two leases after its last use the name is taken over: granted"
is "$(rcli ZRANGE "$(key old1 holders)" 0 -1 | unlid)" n "... the old holder gone"
is "$(counted old1)" "1 0 / 1 0 1" "... and counted"

# ---- Drain -----------------------------------------------------------------------
# A drained name grants nothing new: its holders run on, newcomers and
# waiters queue in line order (and hear why); undrained, the waiters that
# fit are granted at once, in line order, with the release's wake message.
sub dr
acquire dr h 2 >/dev/null
r=$(drain dr 1 "incident 42: disk full")
is "$(j "$r" 'r[:2]')" '[1,""]' "drain: a name not drained before is drained"
like "$(rcli HGET "$(key dr clock)" '!')" '^a 0 [0-9]+ root incident 42: disk full$' "drain: the record says by whom, when and why"
is "$(rcli HGET "$(key dr clock)" '@' | cut -d' ' -f1-3,5-)" 'drain a 0 root incident 42: disk full' \
        "drain: the last action says what, by whom and why"
is "$(rcli PTTL "$(key dr clock)") $(rcli PTTL "$(key dr holders)")" "-1 -1" "drain: its keys no longer expire"
r=$(acquire dr w1 2)
is "$(j "$r" 'r[:3]')" "[0,1,1]" "drain: a newcomer with a free slot queues (1st, 1 holds)"
like "$(j "$r" 'r[6]')" '^a 0 [0-9]+ root incident 42: disk full$' "drain: ... and is told the drain"
is "$(j "$(acquire dr w2 2)" 'r[:2]')" "[0,2]" "drain: a second queues behind it"
is "$(j "$(renew dr h)" 'r')" "[0]" "drain: the holder is renewed"
is "$(j "$(TTL_MS=600000 renew dr w1 w2)" 'r')" "[0]" "drain: the waiters keep their places"
is "$(j "$(release dr h)" 'r')" "[1]" "drain: the holder leaves: nobody is granted"
is "$(j "$(status dr)" '[len(r[1]), len(r[2]), r[4].split()[4:]]')" '[0,2,["incident","42:","disk","full"]]' \
        "drain: status shows no holder, 2 waiters and the drain"
is "$(j "$(drain dr 1 again)" 'r[0]')" 0 "drain: draining a drained name again only replaces its record (who, when, why)"
is "$(rcli HGET "$(key dr clock)" '@' | cut -d' ' -f1,6-)" 'drain again' "drain: ... and is the last action"
r=$(AS_HOST=b drain dr 0)
is "$(j "$r" '[r[0], r[2], r[5]]')" '[1,"w1","w2"]' "undrain: both waiters are granted at once, in line order"
check "undrain: with the release's wake message" wait_for 5 sh -c "grep -q '^g $(lid w1) ' '$T/wake-dr'"
is "$(rcli HEXISTS "$(key dr clock)" '!')" 0 "undrain: the record is gone"
like "$(rcli PTTL "$(key dr clock)")" '^[1-9][0-9]*$' "undrain: the keys expire again when idle"
is "$(rcli HGET "$(key dr clock)" '@' | cut -d' ' -f1-2,5-)" 'undrain b root ' "undrain: the last action, from host b, no reason"
is "$(j "$(drain dr 0)" 'r[:2]')" '[0,""]' "undrain: of a name not drained changes nothing"
is "$(rcli HGET "$(key dr clock)" '@' | cut -d' ' -f1-2)" 'undrain b' "undrain: ... and is no action"
is "$(counted dr)" "2 0 / 2 0 2" "drain: counted right"
drain gr-dr 1 x >/dev/null
is "$(j "$(acquire gr-dr q 1)" 'r[0]')" 0 "drain: q queues"
r=$(GRACE=$(( $(redis_ms) + 60000 )) drain gr-dr 0)
is "$(j "$r" '[r[0], len(r)]')" "[1,2]" "undrain during a reset's grace: nobody is granted yet"

# The fleet limit: callers that ask for no number (slots 0) need it, and
# take it; the limit in force is the lowest of it and what others asked;
# lowered, it ends no holder; raised, it grants the waiters that fit at
# once; removed, those that asked for none are refused. Leases of a
# minute, as in fifo's: the holders here are renewed once, and a busy
# machine took more than 10 s over the checks that follow.
TTL_MS=60000
sub fl
is "$(j "$(acquire fl n0 0)" 'r')" "[-2]" "fleet limit: a caller asking for none, with no fleet limit, is refused"
is "$(counted fl)" "0 0 / 0 0 0" "fleet limit: ... and nothing of it is kept"
r=$(fleet_limit fl 2 "two at most")
is "$(j "$r" 'r')" '[""]' "fleet limit: set to 2 (none before)"
like "$(rcli HGET "$(key fl clock)" '#')" '^2 a 0 [0-9]+ root two at most$' "fleet limit: the record says N, by whom, when and why"
is "$(rcli HGET "$(key fl clock)" '@' | cut -d' ' -f1-3,5-)" 'limit a 0 root set to 2: two at most' \
        "fleet limit: the last action says what, by whom and why"
is "$(rcli PTTL "$(key fl clock)")" -1 "fleet limit: the name's keys no longer expire"
is "$(j "$(acquire fl h1 0)" 'r[0], r[4]')" "[1,2]" "fleet limit: a caller asking for none is granted, limit 2"
is "$(j "$(acquire fl h2 0)" 'r[0]')" 1 "fleet limit: a second is granted"
is "$(j "$(acquire fl w1 0)" 'r[:4]')" "[0,1,2,2]" "fleet limit: a third waits (1st, 2 hold, limit 2)"
is "$(j "$(acquire fl w2 5)" 'r[:4]')" "[0,2,2,2]" "fleet limit: one asking for 5 waits too: the fleet limit is lower"
is "$(j "$(status fl)" 'r[3], r[6].split()[0]')" '[2,"2"]' "fleet limit: status gives the limit in force and the record"
r=$(fleet_limit fl 1)
is "$(j "$r" '[len(r), r[0].split()[0]]')" '[1,"2"]' "fleet limit: lowered to 1, nobody granted (it was 2)"
is "$(j "$(renew fl h1 h2)" 'r')" "[0]" "fleet limit: lowered, both holders are renewed"
is "$(j "$(release fl h1)" 'r')" "[1]" "fleet limit: one holder leaves: with 1 holding of limit 1, nobody is granted"
r=$(fleet_limit fl 4)
is "$(j "$r" '[r[1], r[4]]')" '["w1","w2"]' "fleet limit: raised to 4, both waiters are granted at once, in line order"
check "fleet limit: with the release's wake message" wait_for 5 sh -c "grep -q '^g $(lid w1) ' '$T/wake-fl'"
is "$(j "$(acquire fl w3 0)" '[r[0], r[3], r[4]]')" "[1,4,4]" "fleet limit: a fourth is granted (4 hold, limit 4)"
is "$(j "$(acquire fl w4 0)" 'r[:2]')" "[0,1]" "fleet limit: a fifth waits"
is "$(j "$(acquire fl w5 0)" 'r[:2]')" "[0,2]" "fleet limit: a sixth waits behind it"
r=$(fleet_limit fl 0 "back to the drop-ins")
is "$(j "$r" '[len(r), r[0].split()[0], r[1]]')" '[4,"4","w4"]' \
        "fleet limit: removed (it was 4): the limit in force is what w2 asked (5), and the next waiter is granted"
is "$(rcli HEXISTS "$(key fl clock)" '#')" 0 "fleet limit: the record is gone"
is "$(j "$(acquire fl w5 0)" 'r')" "[-2]" "fleet limit: removed, the waiter that asked for none is refused"
like "$(rcli PTTL "$(key fl clock)")" '^[1-9][0-9]*$' "fleet limit: removed, the keys expire again when idle"
is "$(j "$(reassert fl w6 0 9 1)" 'r')" 0 "fleet limit: a holder that asked for none is re-asserted within the limit in force (5 of 5 hold): lost"
is "$(counted fl)" "5 1 / 5 1 6" "fleet limit: counted right after all that"
# Redis lost the fleet limit with the data: holders that asked for none
# are put back (nothing is granted without a limit).
sub fr
fleet_limit fr 1 >/dev/null
acquire fr x 0 >/dev/null
fleet_limit fr 0 >/dev/null
is "$(j "$(reassert fr y 0 9 1)" 'r')" 1 "fleet limit gone, nobody asked a number: a holder that asked for none is re-asserted"
is "$(j "$(acquire fr z 0)" 'r')" "[-2]" "... and a newcomer asking for none is refused"
unset TTL_MS

# Weights: a lease takes WEIGHT units of the limit; HELD counts units; the
# line stays first come, first served (a heavy head is not overtaken by a
# light one behind it); a weight above the limit in force is refused; the
# record keeps the weight ("*K" before the description), status shows it.
sub wt
is "$(j "$(WEIGHT=2 acquire wt big1 3)" '[r[0], r[3], r[4]]')" "[1,2,3]" "weights: a job of weight 2 is granted (2 units held of 3)"
is "$(rec wt big1 7-)" "*2 INFO lease=big1" "weights: its record keeps the weight before the description"
is "$(state wt 1)" 2 "weights: HELD counts units"
is "$(j "$(WEIGHT=2 acquire wt big2 3)" 'r[:4]')" "[0,1,2,3]" "weights: a second of weight 2 does not fit beside it: it waits, first"
is "$(j "$(acquire wt small 3)" 'r[:2]')" "[0,2]" "weights: a light one behind it waits too, though 1 unit is free: no overtaking"
is "$(j "$(WEIGHT=4 acquire wt huge 3)" 'r')" "[-3,3]" "weights: a weight above the limit in force is refused, with the limit"
is "$(j "$(status wt)" '[[h[0], h[5]] for h in r[1]] + [[q[0], q[3]] for q in r[2]]')" '[["big1",2],["big2",2],["small",1]]' \
        "weights: status gives each one's weight"
r=$(release wt big1)
is "$(j "$r" '[r[0], r[1], r[4]]')" '[1,"big2","small"]' "weights: the heavy one leaves: both waiters fit (2 + 1 of 3) and are granted, in line order"
is "$(state wt 1-2)" "3 0" "weights: 3 units held, nobody in line"
is "$(j "$(renew wt big2 small)" 'r')" "[0]" "weights: both renewed"
is "$(j "$(acquire wt one 3)" 'r[:4]')" "[0,1,3,3]" "weights: a newcomer of weight 1 waits (3 of 3)"
is "$(j "$(release wt small)" 'r[:2]')" '[1,"one"]' "weights: the light one leaves: the newcomer fits"
is "$(j "$(reassert wt lost 3 9 1)" 'r')" 0 "weights: a re-assertion that does not fit is refused (3 of 3 held)"
is "$(j "$(release wt one)" 'r')" "[1]" "weights: one leaves (2 of 3 held)"
is "$(j "$(WEIGHT=2 reassert wt back 3 9 1)" 'r')" 0 "weights: a re-assertion of weight 2 does not fit beside 2 of 3"
is "$(j "$(reassert wt back 3 9 1)" 'r')" 1 "weights: one of weight 1 does"
is "$(counted wt)" "3 0 / 2 0 2" "weights: counted right (HELD is 3 units of 2 holders)"
rcli HDEL "$(key wt clock)" . >/dev/null
is "$(j "$(acquire wt after 3)" 'r[:4]')" "[0,1,3,3]" "weights: a state lost from the hash is counted again with the weights (3 of 3)"

# Waiters already in line when the name is drained look again (and hear why).
sub dw
acquire dw h 1 >/dev/null
acquire dw w 1 >/dev/null
log_lacks "$T/wake-dw" '^message$' '^subscribe$' "drain: no wake message before the drain"
drain dw 1 y >/dev/null
check "drain: those in line are told to look again ('1')" wait_for 5 heard dw 1

# ---- Revoke ----------------------------------------------------------------------
# Root takes a held slot back, whoever holds it: its holder's agent is
# told on the wake channel ("r LEASE") and its renewals fail, but its
# units stay counted until it releases or its lease runs out (its last
# renewal + the lease: a holder cut off from Redis fences itself at 2/3
# of it and is gone by then); nobody is granted before.
sub rf
acquire rf h 1 >/dev/null
acquire rf w 1 "$P1" >/dev/null
th=$(rec rf h 4)
expiry=$(rcli ZSCORE "$(key rf holders)" "$(lid h)")
until_h=$(held_until rf h)
r=$(AS_HOST=b revoke rf h "replaced")
is "$(j "$r" 'r[:3]')" "[5,\"a 1000\",$th]" "revoke: a holder is revoked, nobody granted in its place yet"
is "$(held_until rf h)" "$until_h" "revoke: its expiry stays the end of its lease (not its fence point)"
is "$(j "$r" "$expiry - $(redis_ms) <= r[3] <= 10000")" true \
        "revoke: the reply says when it is free at the latest ($(j "$r" 'r[3]') ms)"
check "revoke: its agent is told on the wake channel ('r h')" wait_for 5 heard rf "r h"
is "$(rec rf h 6)" revoked "revoke: its record says it is revoked"
is "$(counted rf)" "1 1 / 1 1 2" "revoke: it still counts"
is "$(renew rf h w)" '[0,"h"]' "revoke: its renewal finds it missing"
is "$(held_until rf h)" "$until_h" "revoke: ... and does not extend it"
is "$(acquire rf h 1)" '[-1]' "revoke: acquiring it again is refused"
is "$(adopt rf h)" '[-1]' "revoke: so is adopting it"
is "$(reassert rf h 1 "$th" 0)" '-1' "revoke: and re-asserting it"
is "$(j "$(acquire rf w 1)" 'r[0]')" 0 "revoke: w still waits"
r=$(AS_HOST=b revoke rf h)
is "$(j "$r" 'r[:3]')" "[5,\"a 1000\",$th]" "revoke: revoking it again changes nothing"
is "$(held_until rf h)" "$until_h" "revoke: ... nor its expiry"
r=$(release rf h)
is "$(j "$r" 'r[:2]')" '[1,"w"]' "revoke: its agent's release frees it at once, and w is granted"
is "$(counted rf)" "1 0 / 1 0 1" "revoke: counted right"
# Unreleased: free when its lease runs out, by the expiry sweep. Redis' clock
# is moved on a second at a time, each step followed by w's call, rather
# than waited for: a gap in every caller's calls longer than half the
# shortest lease counts as a clock step and ends nobody's lease
# (prelude/clocks.lua, observe), so polls slower than that (a busy
# machine's, with a lease of 600 ms) kept h from ever reaching its
# expiry. A step of 1 s and a call is a gap of 1 s and what the call takes
# (headroom: judged against half the lease, 5 s: 4 s for the call, which
# takes well under 1 s on a busy machine).
acquire rg h 1 >/dev/null
acquire rg w 1 >/dev/null
is "$(j "$(AS_HOST=b revoke rg h)" 'r[0]')" 5 "revoke: h of rg revoked"
lease_end=$(rcli ZSCORE "$(key rg holders)" "$(lid h)")
granted= off=0
while [ -z "$granted" ] && [ "$off" -lt 20000 ]; do
        off=$((off + 1000))
        step_clock "$off"
        [ "$(j "$(acquire rg w 1)" 'r[0]')" = 1 ] && granted=$(redis_ms)
done
check "revoke: w is granted once h's lease ran out, not before (${granted:+$((granted - lease_end)) ms after it}, the clock $off ms on)" \
        [ -n "$granted" -a "${granted:-0}" -ge "$lease_end" ]
is "$(counted rg)" "1 0 / 1 0 1" "revoke: counted right after the sweep"
step_clock 0
# NOW=1 (a host known dead): freed at once.
sub rv
acquire rv h 1 >/dev/null
acquire rv w 1 "$P1" >/dev/null
th=$(rec rv h 4)
is "$(revoke rv w)" '[2,"a 1000"]' "revoke: a lease that waits is not revoked (and says whose it is)"
r=$(NOW=1 AS_HOST=b revoke rv h "host a is dead")
is "$(j "$r" 'r[:4]')" "[1,\"a 1000\",$th,\"w\"]" "revoke now: another host's holder is freed, and w granted in its place"
check "revoke now: its agent is told on the wake channel too" wait_for 5 heard rv "r h"

is "$(j "$r" "r[4] > $th")" true "revoke: w's token $(j "$r" 'r[4]') is above the revoked one's ($th)"
check "revoke: with the release's wake message and w's proof" wait_for 5 sh -c "grep -q '^g $(lid w) .* $P1\$' '$T/wake-rv'"
is "$(rcli HGET "$(key rv clock)" '@' | cut -d' ' -f1-3,5-)" 'revoke b 0 root host a is dead' \
        "revoke: the last action says what, by whom and why"
is "$(renew rv h)" '[0,"h"]' "revoke: the holder's renewal finds its lease missing"
is "$(revoke rv h)" '[0]' "revoke: a lease that holds nothing any more: nothing to do"
is "$(counted rv)" "1 0 / 1 0 1" "revoke: counted right"
acquire rv w2 1 >/dev/null
drain rv 1 maintenance >/dev/null
tw=$(rec rv w 4)
is "$(NOW=1 revoke rv w)" "[1,\"a 1000\",$tw]" "revoke now: while drained, w is revoked and nobody is granted in its place"
is "$(rcli ZCARD "$(key rv queue)")" 1 "revoke: ... and w2 keeps its place"
is "$(WHICH=w revoke rv w2)" '[3,"a 1000"]' "revoke: waiters only (a host's): w2 leaves the line"
drain rv 0 >/dev/null
acquire rv h3 1 >/dev/null
is "$(WHICH=w revoke rv h3)" '[4,"a 1000"]' "revoke: waiters only: a holder is left"
is "$(j "$(NOW=1 WHICH=1 revoke rv h3)" 'r[0]')" 1 "revoke now: both: the holder goes"
is "$(counted rv)" "0 0 / 0 0 0" "revoke: counted right after all that"

# ---- Status --------------------------------------------------------------------
is "$(j "$(status st)" 'r[1:]')" '[[],[],0,"","","",0,0,0]' "status: an unknown name: nobody, limit 0, not drained, no action, no fleet limit, no totals"
is "$(j "$(counts st)" 'r[1:]')" '[0,0,0,"","",""]' "counts: an unknown name: nothing held or waited for, limit 0, no drain, action or fleet limit"
is "$(rcli EXISTS "$(key st clock)")" 0 "counts: a look alone never creates the key"
acquire st h1 2 >/dev/null
AS_HOST=b AS_UID=7 acquire st h2 3 >/dev/null
acquire st w 4 >/dev/null
r=$(status st)
is "$(j "$r" '[[h[0], 0 < h[1] <= 10000, h[3], h[4]] for h in r[1]]')" \
        '[["h1",true,"INFO lease=h1","a 1000"],["h2",true,"INFO lease=h2","b 7"]]' "status: holders, expiry, desc, owner"
is "$(j "$r" 'r[1][0][2]')" "$(rec st h1 4-5)" "status: holder's 'TOKEN SINCE'"
is "$(j "$r" 'r[2:]')" '[[["w","INFO lease=w","a 1000",1]],2,"","","",2,2,1]' "status: the queue (weight 1), the limit in force, no drain, no action, no fleet limit, the totals"
r=$(counts st)
is "$(j "$r" 'r[1:]')" '[2,1,2,"","",""]' "counts: 2 held, 1 waiting, limit 2, as status says"
# headroom: no deadline: the two readings are a call apart (ms), and 60 s
# tells Redis' clock (TIME) from any other the script could give.
is "$(j "$r" "abs(r[0] - $(redis_ms)) < 60000")" true "counts: now_ms is Redis's clock"
# A page: the first 100 holders (by expiry) and waiters (by ticket), the
# totals of all. (Leases of two minutes and more: 215 calls, each a
# process, must not outlast the first.)
for i in $(seq 1 110); do TTL_MS=$((120000 + i)) acquire pg "h$i" 110 >/dev/null; done
for i in $(seq 1 105); do TTL_MS=120000 acquire pg "w$i" 110 >/dev/null; done
r=$(status pg)
is "$(j "$r" '[len(r[1]), r[1][0][0], r[1][-1][0], len(r[2]), r[2][0][0], r[2][-1][0], r[7], r[8], r[9]]')" \
        '[100,"h1","h100",100,"w1","w100",110,110,105]' "status: a page of 100 holders and 100 waiters, in order, and the totals"
is "$(j "$(counts pg)" 'r[1:4]')" '[110,105,110]' "counts: all 110 held and 105 waiting"
WEIGHT=3 acquire pgw big 10 >/dev/null
is "$(j "$(counts pgw)" 'r[1:4]')" '[3,0,10]' "counts: a holder's weight counts as its units"
# headroom: as counts' above; here three calls apart.
is "$(j "$r" "abs(r[0] - $(redis_ms)) < 60000")" true "status: now_ms is Redis's clock"

# (Those from before a restart of Redis ended with it.)
for p in "${SUBSCRIBERS[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
done_testing
