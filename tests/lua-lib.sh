#!/bin/bash
# Sourced by lua-scripts.sh and lua-clocks.sh: a redis-server whose clock
# can be stepped, the agent's library loaded into it as the agent loads it
# (each script a function; KEYS in the order of keys.list), and the
# callers as the agent calls them.
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


# lua_done: the subscribers stopped, the plan closed.
lua_done() {
        local p
        # (Those from before a restart of Redis ended with it.)
        for p in "${SUBSCRIBERS[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
        done_testing
}
