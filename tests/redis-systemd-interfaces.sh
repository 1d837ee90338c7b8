#!/bin/bash
# The agent's systemd interfaces without a booted systemd: socket activation
# through systemd-socket-activate, and the sd_notify protocol (READY=1, a
# live STATUS= line, WATCHDOG=1, STOPPING=1) read from a NOTIFY_SOCKET.
. "$(dirname "$0")/lib.sh"
require systemd-socket-activate

start_redis
notify_listen "$T/notify" "$T/notify.log"

systemd-socket-activate -l "@$NSBASE-sa/agent" -E NOTIFY_SOCKET="$T/notify" -E WATCHDOG_USEC=1000000 \
        "$FLEETSEMD" --redis "unix:$T/redis.sock" --host-id sa --lease-ttl 2s >"$T/agent-sa.log" 2>&1 &
activator=$!
check "the socket is listening before the agent runs" wait_for 5 agent_listening "$NSBASE-sa"

fs_exec sa run --slots 1 held -- sleep 300 &
job=$!
check "the first request starts the agent, which takes the socket from systemd" \
        wait_for 5 sh -c "[ \$(redis-cli -s $T/redis.sock ZCARD 'fleetsem:{held}:holders') = 1 ]"
like "$(cat "$T/agent-sa.log")" "listening on @$NSBASE-sa/agent" "the agent serves the passed socket"
like "$(cat "$T/agent-sa.log")" "configuration says namespace fleetsem, but systemd passed @$NSBASE-sa/agent" \
        "and takes its namespace from it, saying so"
check "READY=1 is sent" wait_for 5 grep -q 'READY=1' "$T/notify.log"
check "STATUS= shows the held slot and Redis" wait_for 5 grep -q 'STATUS=1 slot(s) held, 0 waiting, Redis up' "$T/notify.log"
check "WATCHDOG=1 pings keep coming (WATCHDOG_USEC=1s)" wait_for 5 sh -c "[ \$(grep -c 'WATCHDOG=1' '$T/notify.log') -ge 2 ]"

kill -KILL "$job"
wait "$job" 2>/dev/null
check "STATUS= follows the release" wait_for 5 grep -q 'STATUS=0 slot(s) held, 0 waiting, Redis up' "$T/notify.log"

kill -TERM "$activator"
wait "$activator"
is "$?" 0 "the agent exits cleanly on SIGTERM"
check "STOPPING=1 is sent" wait_for 5 grep -q 'STOPPING=1' "$T/notify.log"
done_testing
