#!/bin/bash
# A hung agent under the shipped fleetsemd.service and the default lease:
# the agent is SIGSTOPped while a unit on h1 holds the only slot and a
# unit on h2 waits. systemd's watchdog replaces the hung agent, the new
# one re-adopts the slot inside the lease, the unit keeps running and
# nobody else gets in, then, once the holder stops, the waiter starts.
TTL=15s
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-nspawn.sh"

start_redis
ns_boot h1 h2
EV=$T/shared/events

state() { ns_prop "$1" "$2" ActiveState; }
svc() {
        printf '[Service]\nExecStart=/bin/sh -c '\''echo "start %%H %%n $$(date +%%%%s%%%%N)" >>/run/fleetsem-test/events; exec sleep infinity'\''\n' |
                ns_unit "$1" "$2"
}
for h in h1 h2; do
        svc "$h" guarded.service
        ns "$h" fleetsem limit guarded.service 1 >/dev/null
done
ns h1 systemctl start guarded.service
check "h1's unit holds the slot" wait_for 10 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{guarded}:holders') = 1 ]"
holder=$(rcli ZRANGE 'fleetsem:{guarded}:holders' 0 -1)
ns h2 systemctl start --no-block guarded.service
check "h2's unit waits" wait_for 10 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{guarded}:queue') = 1 ]"

pid=$(ns_prop h1 fleetsemd.service MainPID)
restarts=$(ns_prop h1 fleetsemd.service NRestarts)
t0=$(now_ms)
ns h1 kill -STOP "$pid"
check "systemd's watchdog replaces the hung agent" \
        wait_for 30 sh -c "[ \"\$(nsenter -t $(ns_leader h1) -a systemctl show -P NRestarts fleetsemd.service)\" -gt $restarts ]"
check "the new agent re-adopts the slot" \
        wait_for 10 sh -c "nsenter -t $(ns_leader h1) -a journalctl -q -u fleetsemd.service | grep -q 'Re-adopted 1 held slot'"
took=$(( $(now_ms) - t0 ))
# Inside the lease: the checks on state below (the same lease a lease
# later, nobody else in) fail when it took longer; the time is a figure.
echo "# hung agent replaced and the slot re-adopted in ${took}ms (the lease: 15000ms)"
like "$(journal h1 -u fleetsemd.service)" "[Ww]atchdog timeout" "the journal says it was the watchdog"
# Past a whole lease since the agent stopped: the slot is still h1's.
wait_for 20 sh -c "[ \$(( \$(date +%s%3N) - $t0 )) -gt 16000 ]"
is "$(rcli ZRANGE 'fleetsem:{guarded}:holders' 0 -1)" "$holder" "a lease after the agent hung, the same lease holds"
is "$(state h1 guarded.service) $(state h2 guarded.service)" "active activating" "the unit kept running and nobody else got in"
is "$(grep -c 'guarded.service' "$EV")" 1 "the unit on h2 never started"
ns h1 systemctl stop guarded.service
check "once the holder stops, the waiter starts" wait_for 10 sh -c "[ \$(grep -c 'guarded.service' $EV) = 2 ]"
ns h2 systemctl stop guarded.service
ns_done_testing
