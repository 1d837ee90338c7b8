#!/bin/bash
# Out of file descriptors: an agent limited to 128 open files, and nobody
# (allowed some names) holding as many slots and connections as it can. A
# permitted user hears "busy", never "not permitted"; root is served or
# told busy, never refused; the agent lives on.
TTL=2s
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-security.sh"

printf '#!/bin/sh\nexec prlimit --nofile=128:128 %s "$@"\n' "$FLEETSEMD" >"$T/fleetsemd-128"
chmod 755 "$T/fleetsemd-128"
FLEETSEMD="$T/fleetsemd-128"
printf 'allow = emf-* nobody\n' >"$T/agent.conf"
start_redis
start_agent a --config "$T/agent.conf"
pid=$(agent_pid a)
is "$(awk '/^Max open files/ { print $4 }' "/proc/$pid/limits")" 128 "the agent may open 128 files"

coproc LEASES { attack a leases 200 emf-a 2>"$T/leases-err.log"; }
replies=$(replies "${LEASES[0]}")
like "$(printf '%s' "$replies" | grep '^GRANTED')" '^GRANTED [0-9]+$' "nobody holds some slots"
is "$(printf '%s' "$replies" | grep -vE '^(GRANTED|ERROR code=busy message=the agent is short of file descriptors; try again) [0-9]+$')" "" \
        "every other request of nobody is answered busy"
echo "# agent fds: $(fds "$pid") of 128"
flood=$(attack a flood 60 </dev/null)
like "$flood" '^open [0-9]+' "nobody's connections meanwhile: $flood"

out=$(attack a bad 5 emf-b)
like "$out" '^ERROR code=busy message=the agent is short of file descriptors; try again 5$' \
        "a permitted user is told busy, not 'not permitted'"
for i in 1 2 3; do
        fs a run --slots 1 emf-root -- true 2>"$T/root.err"
        rc=$?
        [ "$rc" = 0 ] && break
        sleep 0.2       # not synchronisation: a client's pause before it tries again
done
check "root's request succeeds or is busy, never 'not permitted' (exit $rc: $(cat "$T/root.err"))" test "$rc" = 0 -o "$rc" = 69
check "root is served" test "$rc" = 0
check "the agent lives on" kill -0 "$pid"
exec {LEASES[1]}>&-
wait "$LEASES_PID"
check "nobody's slots go with its anchors" wait_for 10 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{emf-a}:holders') = 0 ]"
fs a run --slots 1 emf-root -- true
is "$?" 0 "root is served afterwards"
done_testing
