#!/bin/bash
# Connection flood: nobody opens 200 connections with max_clients_per_user
# 100, in every state (idle, mid-request, STATUS asked and never read). Its
# connections past the cap are refused, and told why; root's jobs and
# PAM-less users are still served, at once.
TTL=2s
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-security.sh"

printf 'max_clients_per_user = 100\nmax_clients = 400\nallow = flood-ok daemon\n' >"$T/agent.conf"
start_redis
start_agent a --config "$T/agent.conf"
pid=$(agent_pid a)
base_fds=$(fds "$pid")

coproc FLOOD { attack a flood 200; }
read -r -t 30 opened <&"${FLOOD[0]}"
like "$opened" '^open [0-9]+ refused 0 busy [0-9]+$' "nobody connects 200 times (100 allowed): $opened"
# 134 of them are idle or mid-request, which the agent keeps: at least 34
# are past the cap whatever the STATUS ones do. (The log says so too, but
# only within the lines a minute one user's doings may cause: the STATUS
# refusals may come first.)
busy=$(sed -n 's/.* busy \([0-9]*\)$/\1/p' <<<"$opened")
check "the agent refuses those past the cap, saying why (${busy:-?} told)" test "${busy:-0}" -ge 34
flood_fds=$(fds "$pid")
check "it keeps at most 100 of them (fds: $base_fds before, $flood_fds now)" test $((flood_fds - base_fds)) -le 105

ms=$(ms_of fs a run --slots 1 flood-root -- true)
is "$?" 0 "root's run still succeeds"
echo "# root's run took ${ms}ms during the flood"
# headroom: 5 s, 45 times the 21 to 110 ms it took in five runs on 2 cores
# at a load of 16 to 19.
check "within 5s (${ms}ms)" test "$ms" -lt 5000
out=$(setpriv --reuid=daemon --regid=daemon --clear-groups env FLEETSEM_NAMESPACE="$NSBASE-a" "$FLEETSEM" run --slots 1 flood-ok -- true 2>&1)
is "$?" 0 "another permitted user is still served${out:+ ($out)}"

# The idle and mid-request ones go after 10s without a request; the STATUS
# answers fit in the socket: the agent is back to what it held before.
# headroom: 60 s, 6 times the 9.8 s they took to go on 2 cores at a load of
# 16 to 19 (nearly all of it the agent's 10 s: a connection kept is kept
# for good).
check "the flood's connections are dropped (after 10 s without a request)" \
        wait_for 60 sh -c "[ \$(ls /proc/$pid/fd | wc -l) -le $((base_fds + 5)) ]"
exec {FLOOD[1]}>&-
wait "$FLOOD_PID"
done_testing
