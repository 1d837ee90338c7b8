#!/bin/bash
# Connection flood: nobody opens max_clients_per_user + 50 connections in
# every state (idle, mid-request, STATUS asked and never read). Its
# connections past the cap are refused; root's jobs and PAM-less users
# are still served, at once.
TTL=2s
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-security.sh"

printf 'max_clients_per_user = 100\nmax_clients = 400\nallow = flood-ok daemon\n' >"$T/agent.conf"
start_redis
start_agent a --config "$T/agent.conf"
pid=$(agent_pid a)
base_fds=$(fds "$pid")

coproc FLOOD { attack a flood 150; }
read -r -t 30 opened <&"${FLOOD[0]}"
like "$opened" '^open 150 ' "nobody opens 150 connections (100 allowed)"
check "the agent refuses those past the cap" wait_for 5 grep -q "uid $NOBODY_UID).*too many connections of this user" "$T/agent-a.log"
flood_fds=$(fds "$pid")
check "it keeps at most 100 of them (fds: $base_fds before, $flood_fds now)" test $((flood_fds - base_fds)) -le 105

ms=$(ms_of fs a run --slots 1 flood-root -- true)
is "$?" 0 "root's run still succeeds"
echo "# root's run took ${ms}ms during the flood"
check "within 5s" test "$ms" -lt 5000
out=$(setpriv --reuid=daemon --regid=daemon --clear-groups env FLEETSEM_NAMESPACE="$NSBASE-a" "$FLEETSEM" run flood-ok -- true 2>&1)
is "$?" 0 "another permitted user is still served${out:+ ($out)}"

# The idle and mid-request ones go after 10s without a request; the STATUS
# answers fit in the socket: the agent is back to what it held before.
check "the flood's connections are dropped within 15s" wait_for 15 sh -c "[ \$(ls /proc/$pid/fd | wc -l) -le $((base_fds + 5)) ]"
exec {FLOOD[1]}>&-
wait "$FLOOD_PID"
done_testing
