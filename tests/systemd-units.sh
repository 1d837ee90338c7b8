#!/bin/bash
# Services limited fleet-wide under a real systemd: three booted containers
# ("hosts") each with a socket-activated agent, one Redis. Everything is
# checked from outside: Redis' own state, systemd's unit properties and
# journal, and the times the services themselves wrote down.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-nspawn.sh"

start_redis
ns_boot h1 h2 h3
EV=$T/shared/events

# --- the agent's unit, as shipped -------------------------------------------------
exposure=$(ns h1 systemd-analyze security fleetsemd.service --no-pager 2>&1 | sed -n 's/.*Overall exposure level for fleetsemd.service: \([0-9.]*\).*/\1/p')
check "systemd-analyze security rates the shipped fleetsemd.service ${exposure:-?} (at most 2.0, OK)" \
        awk -v e="${exposure:-99}" 'BEGIN { exit !(e <= 2.0) }'

# A service that notes when it runs, on which host, with which token.
for h in h1 h2 h3; do
        ns_unit "$h" worker@.service <<'EOF'
[Service]
ExecStart=/bin/sh -c 'echo "start %H %i $${FLEETSEM_TOKEN:-none} $$(date +%%s%%N)" >>/run/fleetsem-test/events; exec sleep infinity'
ExecStopPost=/bin/sh -c 'echo "stop %H %i - $$(date +%%s%%N)" >>/run/fleetsem-test/events'
EOF
        ns "$h" fleetsem limit worker@.service 2 >"$T/limit-$h.log" 2>&1
        is "$?" 0 "$h: fleetsem limit worker@.service 2"
done
like "$(ns h1 cat /etc/systemd/system/worker@.service.d/50-fleetsem.conf)" \
        'ExecStartPre=\+/usr/local/bin/fleetsem acquire --slots 2 worker' "the drop-in runs the helper before the service"
is "$(ns_prop h1 worker@x.service NotifyAccess) $(ns_prop h1 worker@x.service FileDescriptorStoreMax)" "all 1" \
        "systemd reloaded it: NotifyAccess=all, FileDescriptorStoreMax=1"

lease_of() { ns "$1" sed -n 's/^FLEETSEM_LEASE=//p' "/run/fleetsem/$2.env" 2>/dev/null; }
in_redis() { [ -n "$(rcli ZSCORE "fleetsem:{$1}:$2" "$3")" ]; }
queued_total() { echo $(( $(holders "$1") + $(waiters "$1") )); }
state() { ns_prop "$1" "$2" ActiveState; }

# --- 2 slots, 6 starts on 3 hosts: 2 run, 4 wait in line ----------------------
order=()
n=0
for h in h1 h2 h3; do
        for i in a b; do
                ns "$h" systemctl start --no-block "worker@$i.service"
                n=$((n + 1))
                wait_for 10 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{worker}:holders') -ge 0 ] && [ \$(( \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{worker}:holders') + \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{worker}:queue') )) = $n ]" ||
                        not_ok "start $n ($h worker@$i) reached Redis"
                order+=("$h $i")
        done
done
check "2 hold in Redis" wait_for 10 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{worker}:holders') = 2 ]"
is "$(waiters worker)" 4 "4 wait in Redis' queue"
is "$(ns_prop h1 fleetsemd.service Type) $(ns_prop h1 fleetsemd.service WatchdogUSec)" "notify 3s" "the socket-activated agent runs as Type=notify with a watchdog"
check "h1's two are running" wait_for 10 sh -c "[ \"\$(nsenter -t $(ns_leader h1) -a systemctl is-active worker@a worker@b | tr '\n' ' ')\" = 'active active ' ]"
is "$(state h2 worker@a.service) $(state h3 worker@b.service)" "activating activating" "the others are still starting"
is "$(ns_prop h3 worker@b.service StatusText)" "Waiting for fleet slot worker: position 4 in queue, 2 of 2 in use" \
        "systemctl status shows the place in line"
like "$(ns h3 systemctl status worker@b.service --no-pager 2>&1)" 'Status: "Waiting for fleet slot worker: position 4' \
        "... in systemctl status itself"
# The token Redis granted h1's worker@a (tokens start from Redis' clock).
t1=$(record worker "$(lease_of h1 worker@a.service)" 4)
is "$(ns_prop h1 worker@a.service StatusText)" "Holding fleet slot worker (token $t1)" "a holder's status names its token"
like "$(ns h1 cat /run/fleetsem/worker@a.service.env)" "FLEETSEM_NAME=worker"$'\n'"FLEETSEM_TOKEN=$t1"$'\n''FLEETSEM_LEASE=[0-9a-f]{32}' \
        "/run/fleetsem/UNIT.env names the slot"
is "$(ns h1 stat -c '%U %a' /run/fleetsem/worker@a.service.env 2>&1)" "root 644" "... root-owned, 0644"
like "$(grep '^start h1 a ' "$EV")" "^start h1 a $t1 " "the service itself sees FLEETSEM_TOKEN (EnvironmentFile=)"

# --- systemctl stop releases at once -------------------------------------------
lease=$(lease_of h1 worker@a.service)
check "h1 worker@a holds lease $lease in Redis" in_redis worker holders "$lease"
ns h1 systemctl stop worker@a.service
check "systemctl stop: the slot is gone from Redis when stop returns" sh -c "! redis-cli -s $REDIS_SOCK ZSCORE 'fleetsem:{worker}:holders' $lease | grep -q ."
check "the next in line (h2 worker@a) starts" wait_for 5 sh -c "grep -q '^start h2 a ' $EV"

# --- systemctl kill -s KILL of the main process releases at once -------------------
lease=$(lease_of h1 worker@b.service)
ns h1 systemctl kill -s KILL --kill-who=main worker@b.service
check "kill -9 of the main process: the slot is released" wait_for 2 sh -c "! redis-cli -s $REDIS_SOCK ZSCORE 'fleetsem:{worker}:holders' $lease | grep -q ."
check "the next in line (h2 worker@b) starts" wait_for 5 sh -c "grep -q '^start h2 b ' $EV"

check "h3 worker@b's status moves up to position 2" wait_for 7 sh -c "nsenter -t $(ns_leader h3) -a systemctl show -P StatusText worker@b.service | grep -q 'position 2 in queue'"

# --- the rest, in turn -----------------------------------------------------------
ns h2 systemctl stop worker@a.service
check "h3 worker@a starts" wait_for 5 sh -c "grep -q '^start h3 a ' $EV"
ns h2 systemctl stop worker@b.service
check "h3 worker@b starts" wait_for 5 sh -c "grep -q '^start h3 b ' $EV"
ns h3 systemctl stop worker@a.service worker@b.service
is "$(holders worker) $(waiters worker)" "0 0" "all released, nobody left in line"

is "$(awk '$1 == "start" { printf "%s %s,", $2, $3 }' "$EV")" "h1 a,h1 b,h2 a,h2 b,h3 a,h3 b," \
        "they started in the order they asked (FIFO across hosts)"
tok=$(awk '$1 == "start" { print $4 }' "$EV")
is "$tok" "$(echo "$tok" | sort -n | uniq)" "fencing tokens rise with each grant"
max=$(sort -k5,5n "$EV" | awk '$1 == "start" { n++; if (n > m) m = n } $1 == "stop" { n-- } END { print m }')
is "$max" 2 "never more than 2 ran at once, fleet-wide (from the services' own timestamps)"
is "$(ns_prop h1 worker@b.service ActiveState)" failed "(the killed one is failed, as systemd says)"

# --- stopping a unit that still waits --------------------------------------------
: >"$EV"
ns h1 fleetsem limit --name=solo hold.service 1 >/dev/null
ns h2 fleetsem limit --name=solo waiter.service 1 >/dev/null
for h in h1 h2; do
        printf '[Service]\nExecStart=/bin/sleep infinity\n' | ns_unit "$h" hold.service
        printf '[Service]\nExecStart=/bin/sleep infinity\n' | ns_unit "$h" waiter.service
        ns "$h" systemctl daemon-reload
done
ns h1 systemctl start hold.service
ns h2 systemctl start --no-block waiter.service
check "the waiter is in Redis' queue" wait_for 5 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{solo}:queue') = 1 ]"
t0=$(now_ms)
ns h2 systemctl stop waiter.service
t1=$(now_ms)
check "systemctl stop of a waiting unit returns promptly ($((t1 - t0)) ms)" [ $((t1 - t0)) -lt 3000 ]
is "$(waiters solo)" 0 "it left the queue"
is "$(state h2 waiter.service)" inactive "it is stopped, not failed"

# --- Restart=always keeps its slot through crashes -----------------------------------
for h in h1 h2; do
        ns_unit "$h" crashy.service <<'EOF'
[Unit]
StartLimitIntervalSec=0
[Service]
ExecStart=/bin/sh -c 'echo "start %H - $${FLEETSEM_TOKEN} $$(date +%%s%%N)" >>/run/fleetsem-test/events; sleep 0.5; exit 3'
Restart=always
RestartSec=200ms
EOF
        ns "$h" fleetsem limit crashy.service 1 >/dev/null
done
ns h1 systemctl start --no-block crashy.service
check "h1 crashy holds the slot" wait_for 5 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{crashy}:holders') = 1 ]"
lease=$(rcli ZRANGE 'fleetsem:{crashy}:holders' 0 -1)
ns h2 systemctl start --no-block crashy.service
check "h2 crashy waits" wait_for 5 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{crashy}:queue') = 1 ]"
check "h1 crashy crashed and restarted 3 times" wait_for 10 sh -c "[ \$(nsenter -t $(ns_leader h1) -a systemctl show -P NRestarts crashy.service) -ge 3 ]"
is "$(rcli ZRANGE 'fleetsem:{crashy}:holders' 0 -1)" "$lease" "through the restarts it kept the same lease"
crashy_token=$(record crashy "$lease" 4)
is "$(awk '$2 == "h1" { print $4 }' "$EV" | sort -u | tr '\n' ' ')" "$crashy_token " "... and the same token, every run"
log_lacks "$EV" '^start h2 ' '^start h1 ' "h2 never got in"
is "$(state h2 crashy.service)" activating "h2 still waits"
like "$(journal h1 -u crashy.service)" "crashy: crashy.service still holds its slot" "the journal says why it did not queue"
ns h1 systemctl stop crashy.service
check "stopped for good: h2 gets the slot" wait_for 5 sh -c "grep -q '^start h2 ' $EV"
ns h2 systemctl stop crashy.service

# --- a unit without the settings -------------------------------------------------
ns_unit h1 bare.service <<'EOF'
[Service]
ExecStartPre=+/usr/local/bin/fleetsem acquire --slots 1
ExecStart=/bin/sleep infinity
EOF
ns h1 systemctl daemon-reload
ns h1 systemctl start bare.service 2>/dev/null
is "$(state h1 bare.service)" failed "a unit without NotifyAccess= and FileDescriptorStoreMax= fails to start"
like "$(journal h1 -u bare.service)" "bare.service cannot hold a fleet slot: its \[Service\] section needs NotifyAccess=all FileDescriptorStoreMax=1" \
        "the journal names the lines to add"
like "$(ns_prop h1 bare.service ExecStartPre)" "status=78" "the helper exits 78 (EX_CONFIG)"
is "$(holders bare) $(waiters bare)" "0 0" "and it never queued"

# --- not in a unit, not permitted ------------------------------------------------
out=$(ns h1 fleetsem acquire 2>&1); rc=$?
is "$rc" 64 "fleetsem acquire outside a service, without NAME: usage error (64)"
like "$out" "not running in a systemd service" "... saying so"
ns_unit h1 nobody.service <<'EOF'
[Service]
User=nobody
NotifyAccess=all
FileDescriptorStoreMax=1
ExecStartPre=/usr/local/bin/fleetsem acquire
ExecStart=/bin/sleep infinity
EOF
ns h1 systemctl daemon-reload
ns h1 systemctl start nobody.service 2>/dev/null
like "$(ns_prop h1 nobody.service ExecStartPre)" "status=77" "a user the agent's allow= does not name: refused (77)"
like "$(journal h1 -u nobody.service)" 'uid 65534 may not ask for "nobody"' "... and the journal says why"

# --- fleetsem release in ExecStopPost= ---------------------------------------------
ns_unit h1 giveback.service <<'EOF'
[Service]
ExecStart=/bin/sleep infinity
ExecStopPost=+/usr/local/bin/fleetsem release
EOF
ns h1 fleetsem limit giveback.service 1 >/dev/null
ns h1 systemctl start giveback.service
is "$(holders giveback)" 1 "giveback holds"
ns h1 systemctl stop giveback.service
like "$(journal h1 -u giveback.service)" "giveback: released the slot" "ExecStopPost=fleetsem release gave it back, confirmed"
is "$(holders giveback)" 0 "it is free in Redis"
check "no env file left behind" ns h1 test ! -e /run/fleetsem/giveback.service.env

# --- fleetsem limit --remove -------------------------------------------------------
out=$(ns h1 fleetsem limit worker@.service --remove 2>&1)
like "$out" "Removed /etc/systemd/system/worker@.service.d/50-fleetsem.conf" "limit --remove removes the drop-in"
is "$(ns_prop h1 worker@x.service NotifyAccess)" none "and systemd reloaded without it"
out=$(ns h1 fleetsem limit backup.timer 2 2>&1); rc=$?
is "$rc" 64 "limit on a timer: usage error"
like "$out" "backup.timer is a timer: limit the service it starts" "... pointing at the service"

# --- systemctl reload ----------------------------------------------------------------
pid=$(ns_prop h1 fleetsemd.service MainPID)
echo "allow = reload-* nobody" >>"$T/h1/etc/fleetsem.conf"
ns h1 systemctl reload fleetsemd.service
is "$?" 0 "systemctl reload fleetsemd succeeds"
check "... the agent read the file again (its journal says so)" \
        wait_for 5 sh -c "nsenter -t $(ns_leader h1) -a -- journalctl -q -u fleetsemd.service | grep -q 'Reloaded /etc/fleetsem/fleetsem.conf for uid 0, pid [0-9]* (SIGHUP): 1 allow'"
is "$(ns_prop h1 fleetsemd.service MainPID)" "$pid" "... without a restart"
echo "lease_ttl = forever" >>"$T/h1/etc/fleetsem.conf"
ns h1 systemctl reload fleetsemd.service 2>/dev/null
check "a file with errors fails the reload" [ $? -ne 0 ]
is "$(ns_prop h1 fleetsemd.service ActiveState) $(ns_prop h1 fleetsemd.service MainPID)" "active $pid" \
        "... and the agent runs on as it was"
sed -i '$d' "$T/h1/etc/fleetsem.conf"

ns_done_testing
