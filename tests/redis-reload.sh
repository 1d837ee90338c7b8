#!/bin/bash
# systemctl reload: SIGHUP makes the agent read its configuration again
# without dropping a slot or a client. An allow rule added lets nobody in
# at once; log_level applies at once; a configuration with errors is refused whole and the running
# one kept; a key that cannot change live keeps its value and the reload
# says so; and a Redis ACL password is rotated end to end (new password
# added, the file rewritten, the agent reloaded, the old one removed, the
# agent's connections killed): the agent comes back with the new one and
# the holder keeps its slot throughout.
TTL=3s
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-security.sh"

PORT=$(free_port)
start_redis --port "$PORT" --bind 127.0.0.1
rcli ACL SETUSER fleetsem on '>old-secret' '~*' '&*' '+@all' >/dev/null
printf 'old-secret\n' >"$T/pw"
chmod 600 "$T/pw"
conf() {
        printf 'redis = redis://fleetsem@127.0.0.1:%s\nredis_password_file = %s\nlease_ttl = %s\n' "$PORT" "$T/pw" "$TTL"
        printf '%s\n' "$@"
}
conf >"$T/a.conf"
run_agent a -c "$T/a.conf"
pid=$(agent_pid a)
reloads() { grep -c "Reloaded $T/a.conf" "$T/agent-a.log"; }

fs a run --slots 1 kept -- sleep 120 >"$T/kept.out" 2>&1 &
holder=$!
check "root's job holds a slot" wait_for 10 sh -c "[ \$(redis-cli -p $PORT --user fleetsem --pass old-secret --no-auth-warning ZCARD 'fleetsem:{kept}:holders') = 1 ]"

as_nobody env FLEETSEM_NAMESPACE="$NSBASE-a" "$FLEETSEM" run --slots 1 --no-wait rl-1 -- true 2>"$T/denied"
is "$?" 77 "without an allow rule nobody is refused (exit 77)"

# An allow rule, added live.
conf "allow = rl-* nobody" >"$T/a.conf"
kill -HUP "$pid"
check "the reload is logged, with who sent the signal" wait_for 5 sh -c "[ \$(grep -c 'Reloaded $T/a.conf for uid 0, pid [0-9]* (SIGHUP): 1 allow.* action=reload operator=uid 0' '$T/agent-a.log') -ge 1 ]"
as_nobody env FLEETSEM_NAMESPACE="$NSBASE-a" "$FLEETSEM" run --slots 1 --no-wait rl-1 -- true
is "$?" 0 "... and nobody's request is granted at once"

# The log level, live: at notice a grant is not logged, back at info it is.
conf "allow = rl-* nobody" "log_level = notice" >"$T/a.conf"
n=$(reloads)
kill -HUP "$pid"
check "log_level = notice is reloaded" wait_for 5 sh -c "[ \$(grep -c 'Reloaded $T/a.conf' '$T/agent-a.log') -gt $n ]"
fs a run --no-wait --slots 1000 quiet -- true
is "$?" 0 "... a grant meanwhile"
conf "allow = rl-* nobody" >"$T/a.conf"
n=$(reloads)
kill -HUP "$pid"
wait_for 5 sh -c "[ \$(grep -c 'Reloaded $T/a.conf' '$T/agent-a.log') -gt $n ]"
fs a run --no-wait --slots 1000 loud -- true
check "without it, grants are logged again (info)" wait_for 5 grep -q "Granted slot of loud" "$T/agent-a.log"
log_lacks "$T/agent-a.log" "Granted slot of quiet" "Granted slot of loud" "... and the one at notice never was"

# Errors: refused whole, the running configuration kept.
conf "allow = rl-* nobody" "lease_ttl = forever" "allow = * nobody" >"$T/a.conf"
kill -HUP "$pid"
check "a configuration with errors is refused, saying where" \
        wait_for 5 grep -q "$T/a.conf:5: lease_ttl: expected a duration" "$T/agent-a.log"
like "$(cat "$T/agent-a.log")" "Reload refused: the configuration above has errors; the running one is kept" "... and that it keeps the running one"
as_nobody env FLEETSEM_NAMESPACE="$NSBASE-a" "$FLEETSEM" run --slots 1 --no-wait other -- true 2>/dev/null
is "$?" 77 "... so the rule that came with the errors does not apply"
as_nobody env FLEETSEM_NAMESPACE="$NSBASE-a" "$FLEETSEM" run --slots 1 --no-wait rl-2 -- true
is "$?" 0 "... and the running one still does"

# A key that cannot change live.
conf "allow = rl-* nobody" "key_prefix = renamed" >"$T/a.conf"
n=$(reloads)
kill -HUP "$pid"
check "a new key_prefix is reported as waiting for a restart" \
        wait_for 5 grep -q "host_id, key_prefix, .* changed; they take effect at the next restart" "$T/agent-a.log"
check "... the rest of the file is applied" wait_for 5 sh -c "[ \$(grep -c 'Reloaded $T/a.conf' '$T/agent-a.log') -gt $n ]"
like "$(fs a status kept)" "kept: 1 held" "... and the agent still finds its keys under the old prefix"

# The password, rotated as an operator does it.
rcli ACL SETUSER fleetsem '>new-secret' >/dev/null
printf 'new-secret\n' >"$T/pw"
conf "allow = rl-* nobody" >"$T/a.conf"
kill -HUP "$pid"
check "the reload says it connects again with the new password" \
        wait_for 5 grep -q "connecting to Redis again with the new password" "$T/agent-a.log"
check "... and it is back on Redis" wait_for 10 sh -c "FLEETSEM_NAMESPACE=$NSBASE-a $FLEETSEM metrics | grep -qx 'fleetsem_redis_up 1'"
rcli ACL SETUSER fleetsem '<old-secret' >/dev/null
connected=$(grep -c "Connected to Redis" "$T/agent-a.log")
rcli CLIENT KILL USER fleetsem >/dev/null
check "with the old password removed and its connections killed, the agent connects again" \
        wait_for 10 sh -c "[ \$(grep -c 'Connected to Redis' '$T/agent-a.log') -gt $connected ]"
fs a run --no-wait --slots 1000 after-rotation -- true
is "$?" 0 "... and grants"
is "$(rcli ZCARD 'fleetsem:{kept}:holders')" 1 "root's job kept its slot through it all"
check "... and still runs" kill -0 "$holder"
is "$(fs a metrics | awk '$1 == "fleetsem_lost_total" { print $2 }')" 0 "no slot was lost"
is "$(rcli --no-raw ACL LOG)" "(empty array)" "... on the new password: Redis refused it nothing (ACL LOG empty)"

kill "$holder"
wait "$holder" 2>/dev/null
done_testing
