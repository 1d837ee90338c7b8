#!/bin/bash
# Redis with a password: the agent reads it from a file; a wrong password is
# a clear error; the password never shows in argv, logs or status.
. "$(dirname "$0")/lib.sh"

PW="s3cret-$$-pw"
REDIS_AUTH=$PW
start_redis --requirepass "$PW"
printf '%s\n' "$PW" >"$T/pw"
chmod 600 "$T/pw"
printf 'wrong\n' >"$T/wrong"
chmod 600 "$T/wrong"

start_agent a --redis-password-file "$T/pw"
fs a run --slots 1 --no-wait authed -- true
is "$?" 0 "with the right password, slots are granted"

start_agent b --redis-password-file "$T/wrong"
check "with the wrong password, the agent takes Redis for down" wait_for 5 redis_state_is b down
out=$(fs b run --slots 1 --no-wait authed -- true 2>&1); rc=$?
is "$rc" 78 "wrong password: exit 78 (misconfigured, whatever --on-error says)"
like "$out" 'AUTH failed' "wrong password: the error says so"
like "$(cat "$T/agent-b.log")" 'AUTH failed' "wrong password: the agent logs it"

argv=$(cat "/proc/$(agent_pid a)/cmdline" "/proc/$(agent_pid b)/cmdline" | tr '\0' ' ')
like "$argv" "--redis-password-file $T/pw .*--redis-password-file $T/wrong " "both agents' argv name their password files"
check "the password is not in any agent's argv" sh -c "! printf '%s' \"\$1\" | grep -qF -- '$PW'" - "$argv"
check "agent a's log says it started" started a
check "agent b's log says it started" started b
for h in a b; do agent_lacks "$h" "$PW" "the password is not in agent $h's log"; done
json=$(fs a status --json)
like "$json" '^\{"now_ms":[0-9]+,' "status answers"
check "nor in status" sh -c "! printf '%s' \"\$1\" | grep -qF -- '$PW'" - "$json"

out=$("$FLEETSEMD" --redis "redis://:$PW@localhost:1" --check-config 2>&1); rc=$?
is "$rc" 1 "a password on the command line is refused"
like "$out" 'Refusing a password on the command line' "with the reason"
chmod 644 "$T/pw"
out=$("$FLEETSEMD" --redis "unix:$T/redis.sock" --redis-password-file "$T/pw" --check-config 2>&1); rc=$?
is "$rc" 1 "a world-readable password file is refused"
done_testing
