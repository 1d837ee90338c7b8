#!/bin/bash
# Services under a real systemd when things go wrong: the agent restarts,
# a wait outlasts TimeoutStartSec=, Redis stops answering or goes away.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-nspawn.sh"

start_redis
ns_boot h1 h2
EV=$T/shared/events

state() { ns_prop "$1" "$2" ActiveState; }
in_holders() { [ -n "$(rcli ZSCORE "fleetsem:{$1}:holders" "$2")" ]; }
# svc HOST UNIT [EXTRA SERVICE LINES]: a service that notes when it starts.
svc() {
        { printf '[Service]\nExecStart=/bin/sh -c '\''echo "start %%H %%n $$(date +%%%%s%%%%N)" >>/run/fleetsem-test/events; exec sleep infinity'\''\n'
          [ $# -gt 2 ] && printf '%s\n' "${@:3}"; } | ns_unit "$1" "$2"
}

# --- the agent restarts while units hold slots ------------------------------------
for h in h1 h2; do
        svc "$h" keep@.service
        ns "$h" fleetsem limit keep@.service 2 >/dev/null
done
ns h1 systemctl start keep@a.service keep@b.service
check "h1 holds both slots" wait_for 5 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{keep}:holders') = 2 ]"
before=$(rcli ZRANGE 'fleetsem:{keep}:holders' 0 -1 | sort | tr '\n' ' ')
ns h2 systemctl start --no-block keep@c.service
check "h2 waits" wait_for 5 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{keep}:queue') = 1 ]"
pid=$(ns_prop h1 fleetsemd.service MainPID)
ns h1 systemctl restart fleetsemd.service
check "the agent came back (a new process)" [ "$(ns_prop h1 fleetsemd.service MainPID)" != "$pid" ]
like "$(ns h1 fleetsem status keep)" "keep: 2 held, 1 waiting" "the new agent serves status"
check "it re-adopted both slots" wait_for 5 sh -c "nsenter -t $(ns_leader h1) -a journalctl -q -u fleetsemd.service | grep -q 'Re-adopted 2 held slot'"
keep_holders_are() { [ "$(rcli ZRANGE 'fleetsem:{keep}:holders' 0 -1 | sort | tr '\n' ' ')" = "$before" ]; }
check "the units keep their slots for longer than the lease TTL ($TTL): renewals go on" still_after 3 keep_holders_are
is "$(rcli ZRANGE 'fleetsem:{keep}:holders' 0 -1 | sort | tr '\n' ' ')" "$before" "the units keep the same slots"
is "$(state h1 keep@a.service) $(state h1 keep@b.service) $(state h2 keep@c.service)" "active active activating" \
        "nobody else got in"
ns h1 systemctl stop keep@a.service
check "a unit stopped after the restart still frees its slot" wait_for 5 sh -c "grep -q 'keep@c.service' $EV"
ns h1 systemctl stop keep@b.service
ns h2 systemctl stop keep@c.service

# --- a wait longer than TimeoutStartSec= -------------------------------------------
svc h1 hog.service
svc h2 patient.service "TimeoutStartSec=4s"
ns h1 fleetsem limit --name=slow hog.service 1 >/dev/null
ns h2 fleetsem limit --name=slow --wait 30s patient.service 1 >/dev/null
ns h1 systemctl start hog.service
ns h2 systemctl start --no-block patient.service
t0=$(now_ms)
check "patient waits" wait_for 5 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{slow}:queue') = 1 ]"
state_is() { [ "$(state "$1" "$2")" = "$3" ]; }
check "6 s in, past TimeoutStartSec=4s, it still waits" still_after 6 state_is h2 patient.service activating
ns h1 systemctl stop hog.service
check "once the slot is free it starts" wait_for 5 sh -c "grep -q 'patient.service' $EV"
is "$(state h2 patient.service) $(ns_prop h2 patient.service Result)" "active success" "no timeout"
like "$(journal h2 -u patient.service)" "Waiting|Started patient" "(its journal)"
ns h2 systemctl stop patient.service

# --- a wait that runs out ----------------------------------------------------------
svc h2 brief.service
ns h2 fleetsem limit --name=slow --wait 1s brief.service 1 >/dev/null
ns h1 systemctl start hog.service
ns h2 systemctl start brief.service 2>/dev/null
is "$(state h2 brief.service)" failed "no slot within --wait: the start fails"
like "$(ns_prop h2 brief.service ExecStartPre)" "status=75" "... with exit 75"
is "$(waiters slow)" 0 "and it left the queue"
ns h1 systemctl stop hog.service

# --- lease lost (Redis hangs past the TTL) with --on-lost=stop ------------------------
svc h1 fragile.service
svc h1 sturdy.service
ns h1 fleetsem limit --on-lost=stop fragile.service 1 >/dev/null
ns h1 fleetsem limit sturdy.service 1 >/dev/null
ns h1 systemctl start fragile.service sturdy.service
check "both hold" wait_for 5 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{fragile}:holders') = 1 ] && [ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{sturdy}:holders') = 1 ]"
kill -STOP "$(cat "$T/redis.pid")"
# (Its slot may be free already: killed at once, so it fails.)
check "Redis hung past the TTL: the agent stops the --on-lost=stop unit" wait_for 10 sh -c "[ \"\$(nsenter -t $(ns_leader h1) -a systemctl show -P ActiveState fragile.service)\" = failed ]"
kill -CONT "$(cat "$T/redis.pid")"
like "$(journal h1 -u fleetsemd.service)" "Stopping fragile.service: it lost its fleet slot" "the agent's journal says why"
like "$(journal h1 -u fleetsemd.service)" "Killed what was left of fragile.service \(SIGKILL to its control group\)" \
        "... and that it killed it at once: the slot may have gone elsewhere"
is "$(ns_prop h1 fragile.service Result)" signal "... so it failed, by a signal"
is "$(state h1 sturdy.service)" active "the --on-lost=ignore unit goes on"
like "$(journal h1 -u fleetsemd.service)" "sturdy.service goes on running without its slot of sturdy" "... and that is logged loudly"
ns h1 systemctl stop sturdy.service

# --- Redis gone: --on-error=allow starts anyway, --on-error=deny fails ------------------
svc h1 lenient.service
svc h1 strict.service
ns h1 fleetsem limit lenient.service 1 >/dev/null
ns h1 fleetsem limit --on-error=deny strict.service 1 >/dev/null
stop_redis
ns h1 systemctl start lenient.service
is "$(state h1 lenient.service)" active "Redis down, --on-error=allow (default): the unit starts"
like "$(journal h1 -u lenient.service -p warning)" "lenient: Redis at .* is unreachable.*starting WITHOUT a fleet slot" \
        "with a warning in the journal"
is "$(ns_prop h1 lenient.service StatusText)" "$(ns_prop h1 lenient.service StatusText | grep '^Running without a fleet slot for lenient')" \
        "and says so in systemctl status"
ns h1 systemctl start strict.service 2>/dev/null
is "$(state h1 strict.service)" failed "Redis down, --on-error=deny: the unit fails"
like "$(ns_prop h1 strict.service ExecStartPre)" "status=69" "... with exit 69"
ns h1 systemctl stop lenient.service

# --- Redis back without its state: the unit waits out the grace, and says why ---------
# Started on a path of its own, given an epoch whose grace lasts 15 s, and
# only then put where the agents look: none of them can find it before.
REDIS_SOCK=$T/shared/redis-next.sock start_redis
until_ms=$(( $(REDIS_SOCK=$T/shared/redis-next.sock rcli TIME | head -n1) * 1000 + 15000 ))
REDIS_SOCK=$T/shared/redis-next.sock rcli SET fleetsem:epoch "$(printf '%032x' $((RANDOM + 1))) $until_ms" >/dev/null
REDIS_SOCK=$T/shared/redis-next.sock rcli ZADD fleetsem:census -1 . >/dev/null
mv "$T/shared/redis-next.sock" "$REDIS_SOCK"
svc h1 patient.service
ns h1 fleetsem limit patient.service 1 >/dev/null
check "h1's agent is back on Redis" wait_for 20 sh -c "nsenter -t $(ns_leader h1) -a -- fleetsem metrics | grep -qx 'fleetsem_redis_up 1'"
ns h1 systemctl start --no-block patient.service
check "a unit started in the grace waits, saying why in systemctl status" \
        wait_for 15 sh -c "nsenter -t $(ns_leader h1) -a -- systemctl show -P StatusText patient.service | grep -q 'no slot is granted for another'"
like "$(ns_prop h1 patient.service StatusText)" "^Waiting for fleet slot patient: no slot is granted for another .*: Redis lost its fleetsem state" \
        "... for how long, and that Redis lost its state"
like "$(journal h1 -u patient.service)" "patient: no slot is granted for another" "... and in its journal"
like "$(journal h1 -u fleetsemd.service -p notice)" "No slot is granted through Redis .* Redis lost its fleetsem state" \
        "the agent logs the grace at notice level, with the reason"
check "once the grace is over, the unit runs" wait_for 20 sh -c "[ \"\$(nsenter -t $(ns_leader h1) -a -- systemctl show -P ActiveState patient.service)\" = active ]"
is "$(rcli ZCARD 'fleetsem:{patient}:holders')" 1 "... holding its slot"
ns h1 systemctl stop patient.service

ns_done_testing
