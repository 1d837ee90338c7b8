#!/bin/bash
# The shipped Redis ACL (systemd/redis-acl.conf.example), as shipped: a
# redis-server that includes it (the default user off), agents that log in
# as its "fleetsem" user over TCP with a password file and a database of
# their own, doing real work: grants, a hand-over, renewals, status, a
# FUNCTION DELETE of their library (loaded again), an agent restart (re-adoption)
# and a Redis restart that lost everything (a new epoch, re-assertion).
# Then an ACL that refuses the library's check (no +function|list) under
# agents restarted: their holders keep their slots (the same leases and
# tokens in Redis), each agent logs the ACL rule to add, once, and says so
# in status and its metric, and grants nothing new until the rule is back.
# Redis must refuse the agents nothing (ACL LOG stays empty); its "app"
# user, for every other client, must be refused every forgery, and any
# change to the library; the fleetsem user touches no other key.
TTL=6s
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-ha.sh"

SRC=$(dirname "$0")/..
PORT=$(free_port)
DB=3

# The example with real passwords (fleetsem's by its SHA-256, as the
# example recommends), and its operator on for the test's own look-ups.
acl_conf "$T/acl.conf" "$T/fleetsem.pw" "$T/app.pw" "$T/admin.pw"
FS_PW=$(cat "$T/fleetsem.pw") APP_PW=$(cat "$T/app.pw") ADMIN_PW=$(cat "$T/admin.pw")

as_admin() { redis-cli -p "$PORT" --user admin --pass "$ADMIN_PW" --no-auth-warning -n "$DB" "$@"; }
as_app() { redis-cli -p "$PORT" --user app --pass "$APP_PW" --no-auth-warning -n "$DB" "$@"; }
as_fleetsem() { redis-cli -p "$PORT" --user fleetsem --pass "$FS_PW" --no-auth-warning -n "$DB" "$@"; }

acl_redis() {
        ha_server "$PORT" --include "$T/acl.conf"
        wait_for 10 sh -c "[ \"\$(redis-cli -p $PORT --user admin --pass $ADMIN_PW --no-auth-warning ping)\" = PONG ]" ||
                bail "redis-server with the ACL does not let its operator in"
}

# Usernames of the refusals in ACL LOG, one a line.
refused_users() { as_admin ACL LOG | grep -A1 '^username$' | grep -v -e '^username$' -e '^--$'; }

acl_redis
# A new Redis: nobody held anything before it (see start_redis).
as_admin SET fleetsem:epoch "$(printf '%032x' $$) 0" >/dev/null
as_admin ZADD fleetsem:census -1 . >/dev/null
is "$(redis-cli -p "$PORT" ZCARD 'fleetsem:{x}:holders')" "NOAUTH Authentication required." \
        "the example turns the default user off"

# ---- The ACL names every command the scripts call -------------------------------
rules=" $(as_admin ACL GETUSER fleetsem | sed -n '/^commands$/{n;p}') "
missing=""
for cmd in $(grep -oh "redis\.call('[A-Za-z]*'" "$SRC"/src/agent/library/lua/*.lua | cut -d"'" -f2 | tr 'A-Z' 'a-z' | sort -u); do
        case $rules in *" +$cmd "*) ;; *) missing="$missing $cmd" ;; esac
done
is "$missing" "" "every command the Lua scripts call is allowed to the fleetsem user"
for c in "WAIT 1 100" "ROLE" "SELECT 3" "INFO server" "SUBSCRIBE fleetsem:{x}:wake" "PSUBSCRIBE fleetsem:{*}:wake" \
        "PUNSUBSCRIBE fleetsem:{*}:wake" "ZREVRANGEBYSCORE fleetsem:names +inf 0"; do
        # shellcheck disable=SC2086
        is "$(as_admin ACL DRYRUN fleetsem $c)" OK "and what the agent sends only sometimes: ${c%% *}"
done

# ---- Agents as the fleetsem user --------------------------------------------------
HA_URL="redis://fleetsem@127.0.0.1:$PORT/$DB"
ha_agent a --redis-password-file "$T/fleetsem.pw"
ha_agent b --redis-password-file "$T/fleetsem.pw"

fs a run --slots 1 --no-wait acl-once -- true
is "$?" 0 "an agent logged in as fleetsem grants a slot"
check "every connection of the agents is the fleetsem user's" wait_for 10 sh -c \
        "[ \$(redis-cli -p $PORT --user admin --pass $ADMIN_PW --no-auth-warning CLIENT LIST | grep -c ' user=fleetsem ') -ge 4 ]"

job() {
        local host=$1 name=$2
        # (A signal that ends the job is in its events: who ended it, if
        # anyone but the go file did, shows in the check that fails.)
        fs "$host" run --slots 1 --wait 60s "$name" -- sh -c '
                for s in TERM INT HUP; do trap "echo \"signal $s $0\" >>\"$1\"; exit 1" $s; done
                echo "enter $0" >>"$1"
                while [ ! -f "$2" ]; do sleep 0.02; done
                echo "exit $0" >>"$1"' "$host" "$T/events-$name" "$T/go-$name-$host"
}
job a acl-w & holder=$!
wait_for 10 grep -q '^enter a' "$T/events-acl-w" || not_ok "a's job did not start"
job b acl-w & waiter=$!
check "b's job waits" wait_for 10 sh -c "[ \"\$(redis-cli -p $PORT --user admin --pass $ADMIN_PW --no-auth-warning -n $DB ZCARD 'fleetsem:{acl-w}:queue')\" = 1 ]"

out=$(fs a status acl-w)
like "$out" "acl-w" "status lists the name"
like "$out" "b" "and b's waiter"
exp0=$(as_admin ZRANGE 'fleetsem:{acl-w}:holders' 0 0 WITHSCORES | sed -n 2p)
check "the holder's lease is renewed" wait_for 10 sh -c \
        "[ \"\$(redis-cli -p $PORT --user admin --pass $ADMIN_PW --no-auth-warning -n $DB ZRANGE 'fleetsem:{acl-w}:holders' 0 0 WITHSCORES | sed -n 2p)\" -gt $exp0 ]"

# ---- Forgeries by another client, refused ---------------------------------------
epoch=$(as_admin GET fleetsem:epoch)
token=$(as_admin HGET 'fleetsem:{acl-w}:clock' .)
like "$(as_app SET app:own 1)" '^OK$' "the app user works on its own keys"
like "$(as_app EVAL "return redis.call('INCR', KEYS[1])" 1 app:n)" '^1$' "and may run scripts on them"
# shellcheck disable=SC2016
for attempt in \
        "SET fleetsem:epoch forged" \
        "DEL fleetsem:epoch" \
        "ZADD fleetsem:{acl-w}:holders 99999999999999 forged" \
        "ZREM fleetsem:{acl-w}:holders forged" \
        "HSET fleetsem:{acl-w}:clock . 0" \
        "HSET fleetsem:host:{a} forged x" \
        "ZADD fleetsem:names 1 forged" \
        "RENAME app:own fleetsem:{acl-w}:clock" \
        "COPY app:own fleetsem:{acl-w}:clock REPLACE" \
        "EVAL x 1 fleetsem:{acl-w}:holders" \
        "PUBLISH fleetsem:{acl-w}:wake 1" \
        "SCRIPT FLUSH" \
        "SCRIPT KILL" \
        "FLUSHALL" \
        "FLUSHDB" \
        "SWAPDB 0 3" \
        "CONFIG SET maxmemory-policy allkeys-lru" \
        "CLIENT KILL USER fleetsem" \
        "ACL SETUSER app ~*" \
        "REPLICAOF NO ONE" \
        "FUNCTION DELETE fleetsem" \
        "FUNCTION FLUSH" \
        "FUNCTION FLUSH SYNC" \
        "FUNCTION KILL" \
        "FUNCTION RESTORE x REPLACE"; do
        # shellcheck disable=SC2086
        like "$(as_app $attempt 2>&1)" '^NOPERM' "app: $attempt: NOPERM"
done
# The library, which runs with the agents' rights, cannot be replaced.
library=$(as_admin FUNCTION LIST LIBRARYNAME fleetsem WITHCODE)
like "$library" "fleetsem_version" "the agents loaded their library"
forged=$(printf '#!lua name=fleetsem\nredis.register_function("fleetsem_version", function() return {999, "PUBLISH"} end)')
like "$(as_app FUNCTION LOAD REPLACE "$forged" 2>&1)" '^NOPERM' "app: FUNCTION LOAD REPLACE of a library named fleetsem: NOPERM"
like "$(as_app FUNCTION LOAD "${forged/name=fleetsem/name=other}" 2>&1)" '^NOPERM' "app: FUNCTION LOAD of any library: NOPERM"
is "$(as_admin FUNCTION LIST LIBRARYNAME fleetsem WITHCODE)" "$library" "... the library is as the agents loaded it"
like "$(as_app EVAL "return redis.call('ZADD', 'fleetsem:{acl-w}:holders', 99999999999999, 'forged')" 0 2>&1)" \
        "^(NOPERM|ERR).*(can't access at least one of the keys|ACL failure in script: No permissions to access a key)" \
        "app: a script that writes a fleetsem key it did not declare: refused"
like "$(as_app EVAL "return redis.call('PUBLISH', 'fleetsem:{acl-w}:wake', 'g forged 1 1')" 0 2>&1)" \
        "^(NOPERM|ERR).*(can't publish to the channel|ACL failure in script: No permissions to access a channel)" \
        "app: a script that publishes a wake-up: refused"
like "$(as_app EVAL "return redis.call('DEL', KEYS[1])" 1 'fleetsem:{acl-w}:holders' 2>&1)" '^NOPERM' \
        "app: a script that declares a fleetsem key: refused"
is "$(as_admin GET fleetsem:epoch)" "$epoch" "the epoch is untouched"
is "$(as_admin HGET 'fleetsem:{acl-w}:clock' .)" "$token" "the name's state (the fencing token) is untouched"
is "$(as_admin ZCARD 'fleetsem:{acl-w}:holders')" 1 "the holders are untouched"
is "$(as_admin EXISTS app:own fleetsem:names)" 2 "nothing was renamed away"
is "$(refused_users | sort -u | tr '\n' ' ')" "app " "ACL LOG: every refusal so far is the app user's"
as_admin ACL LOG RESET >/dev/null
# The agents' user: fleetsem's keys only, also through its library.
like "$(as_fleetsem SET app:own forged 2>&1)" '^NOPERM' "fleetsem: SET of another application's key: NOPERM"
like "$(as_fleetsem FCALL "$(as_admin FUNCTION LIST LIBRARYNAME fleetsem | grep -m1 -o 'fleetsem_status_v[0-9]*')" \
        4 'app:{x}:holders' 'app:{x}:queue' 'app:{x}:waiters' 'app:{x}:clock' 2>&1)" '^(NOPERM|ERR.*ACL failure)' \
        "fleetsem: its own library's function on another application's keys: NOPERM"
as_admin ACL LOG RESET >/dev/null

# ---- Hand-over, then Redis loses the library -----------------------------------------
touch "$T/go-acl-w-a"
check "b's job gets the slot when a's ends (wake-up on fleetsem's channel)" \
        wait_for 20 grep -q '^enter b' "$T/events-acl-w"
wait "$holder"
is "$(as_admin FUNCTION DELETE fleetsem)" OK "the operator deletes the library"
# b's agent renews the holder of acl-w: its next renewal finds no function.
check "the agents load the library again (as the fleetsem user)" wait_for 20 sh -c \
        "redis-cli -p $PORT --user admin --pass $ADMIN_PW --no-auth-warning FUNCTION LIST LIBRARYNAME fleetsem | grep -q fleetsem_version"
check "b's agent is up again" wait_for 10 redis_state_is b up
fs b run --slots 1 --wait 20s acl-flushed -- true
is "$?" 0 "... and grants"

# ---- Agent restart: re-adoption --------------------------------------------------------
# b's job holds acl-w: the restarted agent takes its lease back, through
# its re-adoption or the job's own reconnect, whichever comes first, and
# renews it: the same lease, its expiry moved on (only b's agent renews it).
b_lease=$(as_admin ZRANGE 'fleetsem:{acl-w}:holders' 0 -1)
kill -TERM "$(agent_pid b)"
wait "$(agent_pid b)"
b_exp=$(as_admin ZSCORE 'fleetsem:{acl-w}:holders' "$b_lease")
AGENT_HOSTS=(a)
ha_agent b --redis-password-file "$T/fleetsem.pw"
b_renewed() { local e; e=$(as_admin ZSCORE 'fleetsem:{acl-w}:holders' "$b_lease"); [ -n "$e" ] && [ "${e%.*}" -gt "${b_exp%.*}" ]; }
check "the restarted agent takes b's slot back and renews it" wait_for 20 b_renewed

is "$(as_admin ACL LOG)" "" "ACL LOG is empty: Redis refused the agents nothing"

# ---- Redis restarts empty: a new epoch, b's holder re-asserted --------------------------
as_admin SHUTDOWN NOSAVE >/dev/null 2>&1
wait_for 10 sh -c "! redis-cli -p $PORT ping" || bail "redis-server did not stop"
acl_redis
check "b's agent finds the new epoch and re-asserts its holder" \
        wait_for 30 grep -q 'Re-asserted slot of acl-w' "$T/agent-b.log"
is "$(as_admin ZCARD 'fleetsem:{acl-w}:holders')" 1 "the holder is back in Redis"
check "a's agent is back too" wait_for 30 grep -q 'lost its state since' "$T/agent-a.log"
fs a run --slots 1 --wait 30s acl-after -- true
is "$?" 0 "after the grace, slots are granted again"
touch "$T/go-acl-w-b"
wait "$waiter"
is "$(cat "$T/events-acl-w" | tr '\n' ' ')" "enter a exit a enter b exit b " "the jobs ran one at a time"
is "$(metric a fleetsem_lost_total) $(metric b fleetsem_lost_total)" "0 0" "nothing was lost (the agents' counts)"
# (Redis' refusals are ACL LOG's, above and below; the journal's lines name
# the loss and the error code whole: "refused" alone is also the reconnect
# warning's "Connection refused" while Redis restarts.)
for h in a b; do agent_lacks "$h" 'LOST slot of |NOPERM' "agent $h's journal tells of no lost slot and no NOPERM"; done

is "$(as_admin ACL LOG)" "" "nor after the restart"

# ---- A watcher: every name's wake-ups, and an ACL without their pattern -------------
# (agent-raw.py prints what it was told once it is done: 3 s after the last line.)
python3 "$SRC/tests/agent-raw.py" "$NSBASE-a" --hold 3 WATCH >"$T/watch1.out" &
watcher=$!
check "a WATCH makes a's agent hear every name's wake-ups (one pattern)" \
        wait_for 3 sh -c "[ \"\$(redis-cli -p $PORT --user admin --pass $ADMIN_PW --no-auth-warning PUBSUB NUMPAT)\" = 1 ]"
wait "$watcher"
like "$(cat "$T/watch1.out")" '^WATCHING' "... the WATCH was answered"
check "... and the pattern goes with the watcher" \
        wait_for 5 sh -c "[ \"\$(redis-cli -p $PORT --user admin --pass $ADMIN_PW --no-auth-warning PUBSUB NUMPAT)\" = 0 ]"
is "$(as_admin ACL LOG)" "" "the shipped ACL allows it"
# An ACL from before the pattern: Redis refuses it and hiredis closes the
# pub/sub connection; the agent asks once, says so, and never again.
as_admin ACL SETUSER fleetsem resetchannels '&fleetsem:*' >/dev/null
for i in 1 2; do
        python3 "$SRC/tests/agent-raw.py" "$NSBASE-a" --hold 2 WATCH >"$T/watch2.out"
        like "$(cat "$T/watch2.out")" '^WATCHING' "without the pattern in the ACL, WATCH $i is still answered"
done
check "a's agent says Redis refused the pattern, and what the ACL needs" \
        grep -q 'Redis refused the subscription to every name.s wake-ups (fleetsem:{\*}:wake): NOPERM.*needs &fleetsem:{\*}:wake' "$T/agent-a.log"
is "$(grep -c 'Redis refused the subscription to every name' "$T/agent-a.log")" 1 "... once"
is "$(as_admin ACL LOG | awk '/^count$/ { getline; n = $0 } /^fleetsem:\{\*\}:wake$/ { print n }')" 1 \
        "Redis refused one PSUBSCRIBE of the pattern in all, for two watches"
job b acl-w2 & holder=$!
wait_for 10 grep -q '^enter b' "$T/events-acl-w2" || not_ok "b's job did not start"
job a acl-w2 & waiter=$!
check "a's job waits" wait_for 10 sh -c "[ \"\$(redis-cli -p $PORT --user admin --pass $ADMIN_PW --no-auth-warning -n $DB ZCARD 'fleetsem:{acl-w2}:queue')\" = 1 ]"
touch "$T/go-acl-w2-b"
check "a's wake-ups still come: its job gets the slot b's ends" wait_for 10 grep -q '^enter a' "$T/events-acl-w2"
touch "$T/go-acl-w2-a"
wait "$holder" "$waiter"

# ---- The library's check, and an ACL that refuses it ----------------------------------
# The periodic check sends what set-up sends (FCALL fleetsem_version): an
# ACL without +fcall_ro refuses it nothing.
as_admin ACL SETUSER fleetsem resetchannels '&fleetsem:*' '&fleetsem:{*}:wake' -fcall_ro >/dev/null
as_admin ACL LOG RESET >/dev/null
job a acl-ka & ka=$!
job b acl-kb & kb=$!
wait_for 10 grep -q '^enter a' "$T/events-acl-ka" || not_ok "a's job did not start"
wait_for 10 grep -q '^enter b' "$T/events-acl-kb" || not_ok "b's job did not start"
# headroom: a check each 2 s (a third of the 6-s lease): 3 of them
check "without +fcall_ro, Redis refuses the agents nothing for three library checks" \
        still_after 6 sh -c "[ -z \"\$(redis-cli -p $PORT --user admin --pass $ADMIN_PW --no-auth-warning ACL LOG)\" ]"
# A lease and its fencing token (its record's fourth field), as Redis has
# them, of each holder of NAME.
held() { as_admin ZRANGE "fleetsem:{$1}:holders" 0 -1 | while read -r l; do echo "$l $(as_admin HGET "fleetsem:{$1}:clock" "$l" | cut -d' ' -f4)"; done; }
expiry() { as_admin ZRANGE "fleetsem:{$1}:holders" 0 0 WITHSCORES | sed -n 2p; }
ka0=$(held acl-ka) kb0=$(held acl-kb)
like "$ka0 / $kb0" '^[0-9a-f]{32} [0-9]+ / [0-9a-f]{32} [0-9]+$' "each host holds its name's slot (lease, token)"

# An ACL without +function|list, and every agent restarted (an upgrade):
# each finds the library in Redis and may not read its text.
as_admin ACL SETUSER fleetsem '-function|list' >/dev/null
for h in a b; do
        kill -TERM "$(agent_pid "$h")"
        wait "$(agent_pid "$h")"
        is "$?" 0 "agent $h exits cleanly on SIGTERM (restarted)"
        # (Between "Received Terminated" and its exit an agent logs no error.)
        check "... logging no error on its way out" awk '/Received Terminated/ { f = 1; next } f && / error: / { bad = 1 }
                /listening on/ { f = 0 } END { exit bad }' "$T/agent-$h.log"
done
AGENT_HOSTS=()
n0=$(grep -c 'ACL SETUSER fleetsem +function|list' "$T/agent-a.log")
ha_agent a --redis-password-file "$T/fleetsem.pw"
ha_agent b --redis-password-file "$T/fleetsem.pw"
for h in a b; do
        check "agent $h logs the refused check as an error with the ACL rule that fixes it" wait_for 10 grep -q \
                "error: Redis at .* refuses this agent's check of fleetsem's library (FUNCTION LIST: NOPERM.*ACL SETUSER fleetsem +function|list" \
                "$T/agent-$h.log"
        check "agent $h says so in its metric" wait_for 10 metric_is "$h" 'fleetsem_refusing{state="NOPERM"}' 1
done
like "$(fs a status --json)" '"refusing":\{"state":"NOPERM","message":"[^"]*ACL SETUSER fleetsem \+function\|list' \
        "status --json says why nothing is granted, and the fix"
like "$(fs a status)" 'No slot is granted: .*ACL SETUSER fleetsem \+function\|list' "and so does status"
e0=$(expiry acl-kb)
check "b's agent renews its holder" wait_for 10 sh -c "[ \"\$(redis-cli -p $PORT --user admin --pass $ADMIN_PW --no-auth-warning -n $DB ZRANGE 'fleetsem:{acl-kb}:holders' 0 0 WITHSCORES | sed -n 2p)\" -gt $e0 ]"
# headroom: a lease is 6 s; its holders are renewed each 2 s, checked at 20 ms
check "the holders keep their slots past a whole lease" still_after 7 sh -c \
        "grep -qx 'enter a' $T/events-acl-ka && grep -qx 'enter b' $T/events-acl-kb && [ \$(cat $T/events-acl-ka $T/events-acl-kb | wc -l) = 2 ]"
is "$(held acl-ka) / $(held acl-kb)" "$ka0 / $kb0" "Redis holds the same leases with the same tokens"
is "$(metric a fleetsem_lost_total) $(metric b fleetsem_lost_total)" "0 0" "nothing was lost (the agents' counts)"
is "$(grep -c 'ACL SETUSER fleetsem +function|list' "$T/agent-a.log")" $((n0 + 1)) "a's agent logged the refusal once, for every check since"
fs b run --slots 1 --no-wait acl-new -- true 2>"$T/new.err"
is "$?" 78 "a new slot is refused (misconfigured), whatever on_error says"
like "$(cat "$T/new.err")" 'ACL SETUSER fleetsem \+function\|list' "... with the fix"

as_admin ACL SETUSER fleetsem '+function|list' >/dev/null
for h in a b; do
        check "agent $h's next check passes, and it says so" wait_for 10 grep -q \
                'lets this agent check fleetsem.s library again' "$T/agent-$h.log"
        check "... its metric too" wait_for 5 metric_is "$h" 'fleetsem_refusing' 0
done
fs b run --slots 1 --no-wait acl-new -- true
is "$?" 0 "slots are granted again"
touch "$T/go-acl-ka-a"
wait "$ka"
ka_rc=$?
touch "$T/go-acl-kb-b"
wait "$kb"
kb_rc=$?
is "$(cat "$T/events-acl-ka" "$T/events-acl-kb" | tr '\n' ' ')$ka_rc $kb_rc" "enter a exit a enter b exit b 0 0" \
        "both jobs ran to their end, and their runs exited 0"
done_testing
