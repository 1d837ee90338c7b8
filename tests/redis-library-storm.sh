#!/bin/bash
# The library loaded once when every agent finds it missing at once: 8
# agents ("hosts") on one redis-server, which is restarted empty, then
# emptied under them (FUNCTION FLUSH and FLUSHALL); each time Redis holds
# back writes (CLIENT PAUSE WRITE) until every agent has asked for the
# library's version, so that all of them find none together. From Redis'
# own counters (INFO commandstats, total_net_input_bytes): FUNCTION LOAD
# ran once, not once an agent, and Redis received the library's text once;
# the library is this build's, and every agent grants through it. Then
# the agents' Redis user without function|load, the library gone under
# them: every agent refuses with the way out at once (one agent's refused
# load said to the others), not one after another, and once the user may
# again, one of them loads it.
TTL=15s
. "$(dirname "$0")/lib.sh"

N=8
SRC=$(cd "$(dirname "$0")/../src/agent/library" && pwd)
ours=$(python3 "$SRC/embed-lua.py" --library "$SRC/keys.list" "$SRC/scripts.list" "$SRC/replies.list" \
        "$SRC/lua/library.version" "$SRC/lua/prelude")
TEXT_BYTES=${#ours}
int_of TEXT_BYTES "$TEXT_BYTES"
check "the library's text is some KB ($TEXT_BYTES bytes)" [ "$TEXT_BYTES" -gt 10000 ]
V=$(tail -1 "$SRC/lua/library.version" | cut -d' ' -f1)

# cmdstat COMMAND [ok|rejected]: how many times Redis ran it since the
# last CONFIG RESETSTAT (0 when not at all); with ok, less those that
# failed; with rejected, how many it refused to run (the ACL's NOPERM).
cmdstat() {
        rcli INFO commandstats | tr -d '\r' |
                awk -F'[:=,]' -v c="cmdstat_$1" -v k="${2:-}" '$1 == c { n = $3; for (i = 2; i < NF; i += 2) { if (k == "ok" && $i == "failed_calls") n -= $(i + 1); if (k == "rejected" && $i == "rejected_calls") r = $(i + 1) } } END { print (k == "rejected" ? r : n) + 0 }'
}
info_field() { rcli INFO "$1" | tr -d '\r' | sed -n "s/^$2://p"; }
version() { rcli FCALL fleetsem_version 0 | head -1; }
# held_back N: N clients wait for the pause to end (CLIENT LIST's flag b:
# blocked; a write held back by CLIENT PAUSE WRITE).
held_back() { [ "$(rcli CLIENT LIST | grep -c ' flags=[A-Za-z]*b')" = "$1" ]; }
all_up() {
        local h
        for h in "${HOSTS[@]}"; do redis_state_is "$h" up || return 1; done
}

start_redis
HOSTS=()
for i in $(seq 1 "$N"); do HOSTS+=("h$i"); done
for h in "${HOSTS[@]}"; do start_agent "$h"; done
check "the $N agents are up" wait_for 30 all_up
is "$(version)" "$V" "the library is there, version $V"

# after WHAT: the library loaded once, the text received once, every agent
# up and granting.
after() {
        local what=$1 bytes h fails=0
        check "$what: the $N agents are up again" wait_for 30 all_up
        is "$(version)" "$V" "... the library is there again, version $V"
        is "$(cmdstat 'function|load')" 1 "... FUNCTION LOAD ran once, not once an agent"
        is "$(cmdstat 'function|load' ok)" 1 "... and compiled it"
        bytes=$(info_field stats total_net_input_bytes)
        int_of bytes "$bytes"
        check "... Redis received $bytes bytes, less than the library's text twice ($((2 * TEXT_BYTES)))" \
                [ "$bytes" -lt $((2 * TEXT_BYTES)) ]
        for h in "${HOSTS[@]}"; do
                fs "$h" run --slots 1 --no-wait "$what-$h" -- true || fails=$((fails + 1))
        done
        is "$fails" 0 "... every agent grants"
}

# ---- Restarted empty -------------------------------------------------------------
# The agents stopped (SIGSTOP) while Redis restarts, so that none finds it
# before it holds writes back.
for h in "${HOSTS[@]}"; do kill -STOP "$(agent_pid "$h")" || bail "cannot stop agent $h"; done
stop_redis
start_redis
# A new Redis declared empty (as `fleetsem redis-init` does): no grace.
seed_redis rcli
is "$(rcli CLIENT PAUSE 30000 WRITE)" OK "Redis restarted empty, holding back writes"
for h in "${HOSTS[@]}"; do kill -CONT "$(agent_pid "$h")" || bail "cannot continue agent $h"; done
check "every agent waits, its library's version asked" wait_for 20 held_back "$N"
is "$(rcli FUNCTION LIST LIBRARYNAME fleetsem)" "" "... and it has no library"
rcli CONFIG RESETSTAT >/dev/null
is "$(rcli CLIENT UNPAUSE)" OK "writes let through"
after restart

# ---- Emptied under running agents --------------------------------------------------
# One transaction, its EXEC held back: the library and every key gone,
# the Redis declared empty again; then every agent's connection closed,
# so that each asks for the library's version behind it.
coproc FLUSHER { rcli; }
echo 'CLIENT ID' >&"${FLUSHER[1]}"
read -r -t 10 -u "${FLUSHER[0]}" flusher || bail "no CLIENT ID from the transaction's connection"
printf '%s\n' MULTI 'FUNCTION FLUSH' FLUSHALL "SET fleetsem:epoch \"$(printf '%032x' $$) 0\" NX" \
        'ZADD fleetsem:census NX -1 .' >&"${FLUSHER[1]}"
queued=()
for i in 1 2 3 4 5; do read -r -t 10 -u "${FLUSHER[0]}" line && queued+=("$line"); done
is "${queued[*]}" "OK QUEUED QUEUED QUEUED QUEUED" "FUNCTION FLUSH and FLUSHALL in a transaction"
is "$(rcli CLIENT PAUSE 30000 WRITE)" OK "writes held back"
echo EXEC >&"${FLUSHER[1]}"
# (Its own connection: an agent's renewal may wait behind the pause too.)
exec_waits() { rcli CLIENT LIST ID "$flusher" | grep -q ' flags=[A-Za-z]*b'; }
check "... its EXEC waits" wait_for 10 exec_waits
# Every connection but the transaction's and the one that lists them:
# the agents' too where a renewal of theirs waits behind the pause (a
# busy machine's agents may have one there, blocked like the EXEC).
killed=0
for id in $(rcli CLIENT LIST | awk -v f="$flusher" '!/ cmd=client\|list / { sub(/^id=/, "", $1); if ($1 != f) print $1 }'); do
        [ "$(rcli CLIENT KILL ID "$id")" = 1 ] && killed=$((killed + 1))
done
check "the agents' connections closed ($killed)" [ "$killed" -ge "$N" ]
check "every agent waits behind the transaction" wait_for 20 held_back $((N + 1))
rcli CONFIG RESETSTAT >/dev/null
is "$(rcli CLIENT UNPAUSE)" OK "writes let through"
done_=()
for i in 1 2 3 4; do read -r -t 10 -u "${FLUSHER[0]}" line && done_+=("$line"); done
is "${done_[*]}" "OK OK OK 1" "... the transaction ran: no library, no key, an epoch that says so"
exec {FLUSHER[1]}>&-
after flush

# ---- Agents that may not load it ---------------------------------------------------
# (In the ACL audit the agents are its fleetsem user.)
AUSER=default
acl_audit && AUSER=fleetsem
is "$(rcli ACL SETUSER "$AUSER" '-function|load')" OK "the agents' Redis user ($AUSER) may not load code"
rcli CONFIG RESETSTAT >/dev/null
is "$(rcli FUNCTION FLUSH)" OK "the library gone"
like "$(rcli CLIENT KILL TYPE normal SKIPME yes)" '^[1-9][0-9]*$' "... and the agents' connections closed"
all_refuse() {
        local h
        for h in "${HOSTS[@]}"; do redis_state_is "$h" down || return 1; done
}
# (Refused one after another, a claim's life, 5 s, each, 8 agents took 40
# s, each refused by Redis itself: counted below, not timed.)
check "every agent takes Redis for down" wait_for 60 all_refuse
# (An agent takes Redis for down as soon as its library is missing; the
# load it then tries comes after: waited for, not read at once.)
refused_once() { [ "$(cmdstat 'function|load' rejected)" -ge 1 ]; }
check "... Redis refused an agent's FUNCTION LOAD" wait_for 30 refused_once
LMSG="Redis at [^ ]+ has no fleetsem library version $V, and (this|another) agent may not load it \(NOPERM[^)]*\): load it with \`fleetsemd --load-library\`"
# Each agent looks again every 2 s, and its status says so while it
# reconnects: each status is read until it has said it once.
declare -A SAID=()
each_said() {
        local h
        for h in "${HOSTS[@]}"; do
                [ -n "${SAID[$h]:-}" ] || { [[ $(fs "$h" status 2>&1) =~ $LMSG ]] && SAID[$h]=1; }
        done
        [ "${#SAID[@]}" = "$N" ]
}
check "... each status says the library is missing and how to load it" wait_for 30 each_said
is "${#SAID[@]}" "$N" "... all $N of them"
rejected=$(cmdstat 'function|load' rejected)
int_of rejected "$rejected"
check "... Redis refused FUNCTION LOAD to fewer agents ($rejected) than there are ($N): the others refuse on its claim's word" \
        [ "$rejected" -ge 1 -a "$rejected" -lt "$N" ]
logs=()
for h in "${HOSTS[@]}"; do logs+=("$T/agent-$h.log"); done
# (Redis' own word: NOPERM and a space; the claim's: NOPERM and a colon.)
n=$(cat "${logs[@]}" | grep -c "this agent may not load it (NOPERM [A-Za-z]")
# (One a claim's life, 5 s, at most: the agents refused look again every 2 s.)
like "$n" '^[1-3]$' "... Redis refused the load of one agent a claim's life ($n), the others told by its claim"
rcli CONFIG RESETSTAT >/dev/null
is "$(rcli ACL SETUSER "$AUSER" '+function|load')" OK "the agents' user may load code again"
after noperm
if acl_audit; then
        is "$(rcli ACL LOG | awk 'prev == "object" { print } { prev = $0 }' | sort -u)" "function|load" \
                "ACL audit: the agents were refused FUNCTION LOAD alone"
        rcli ACL LOG RESET >/dev/null
fi
done_testing
