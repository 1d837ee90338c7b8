#!/bin/bash
# Real reboots when things go wrong: three booted hosts (as in
# systemd-reboot) start fleetsem reboot at once, at most 1 at a time, with
# a health command that fails until the test makes it pass (a file in the
# host's /var/lib/fleetsem). The first host (X) reboots and, unhealthy,
# keeps the slot, its agent (started by --done) renewing it: the others
# wait and do not reboot, status (and --json)
# on another host says which host holds it and why, its metrics count it.
# While it is up and holding, its agent is restarted: the slot re-adopted
# and renewed, with its token. Root's revoke --now from another host lets
# the next (Y) go on; it reboots and, unhealthy too, holds. Redis is
# restarted empty: Y's slot is re-asserted with its token, the last host
# waits on; Y made healthy gives it back, and the last one, healthy,
# reboots and gives it back once the reset's wait is over. Never two down
# at once.
# (--slots 1 rather than a fleet limit: that is kept in Redis, and leaves
# with its data. host_lease 30s: the lease of a host-held slot, and how
# long nothing is granted on its name after Redis lost its data.)
TTL=3s
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-nspawn.sh"
NS_CONF="host_lease = 30s"

HOSTS="h1 h2 h3"
start_redis
ns_boot_rebooting $HOSTS

lease_of() { rcli ZRANGE 'fleetsem:{reboot}:holders' 0 -1; }
holder_host() { record reboot "$(lease_of)" 1; }
host_holds() { [ "$(holder_host)" = "$1" ] && [ "$(holders reboot)" = 1 ]; }
expiry() { rcli ZSCORE 'fleetsem:{reboot}:holders' "$1"; }
# first_back: the host that rebooted first, once one has.
first_back() {
        local h
        for h in $HOSTS; do [ "$(boots "$h")" = 2 ] && echo "$h"; done | grep -m1 .
}
# others_wait X: the two hosts other than X wait in line, neither rebooted.
others_wait() {
        local h
        for h in $HOSTS; do [ "$h" = "$1" ] || [ "$(boots "$h")" = 1 ] || return 1; done
        [ "$(waiters reboot)" = 2 ]
}
held_metric() { ns "$1" fleetsem metrics | awk '$1 == "fleetsem_host_held_slots{name=\"reboot\"}" { print $2 }'; }
held_metric_is() { [ "$(held_metric "$1")" = "$2" ]; }

ns_sample_holders reboot & sampler=$!

for h in $HOSTS; do
        ns "$h" systemd-run -q --unit=roll --service-type=exec \
                /usr/local/bin/fleetsem reboot --slots 1 --wait 500s --reason "kernel update" \
                --health "test -e /var/lib/fleetsem/healthy" || bail "cannot start fleetsem reboot on $h"
done

# The first host rebooted, and is unhealthy.
wait_for 120 first_back || bail "no host rebooted"
x=$(first_back)
ns_wait_booted "$x"
others=$(for h in $HOSTS; do [ "$h" = "$x" ] || echo "$h"; done | tr '\n' ' ')
peer=${others%% *}
check "$x: fleetsem-reboot-done.service ran its health command and failed" \
        wait_for 60 sh -c "[ \"\$(nsenter -t $(ns_leader "$x") -a systemctl show -P Result fleetsem-reboot-done.service)\" = exit-code ]"
is "$(ns_prop "$x" fleetsem-reboot-done.service ExecMainStatus)" 1 "... with exit 1 (not healthy)"
check "Redis: $x keeps the slot" host_holds "$x"
check "... past its lease_ttl, and the others ($others) wait, not rebooted" still_after 4 others_wait "$x"
check "$x's state is kept for a later --done" test -e "$T/$x/lib/reboot-reboot"
lease=$(lease_of)
token=$(record reboot "$lease" 4)
# (Asked nothing by the test yet: --done started it, so that it renews.)
agent_renews() {
        local before
        [ "$(ns_prop "$1" fleetsemd.service ActiveState)" = active ] || return 1
        before=$(expiry "$2")
        wait_for 10 sh -c "[ \"\$(redis-cli -s '$REDIS_SOCK' ZSCORE 'fleetsem:{reboot}:holders' $2)\" != '$before' ]"
}
check "$x's agent runs after the failed --done, and renews the slot" agent_renews "$x" "$lease"

# Who holds it and why, from another host; the metric on the holder.
json=$(ns "$peer" fleetsem status --json reboot)
like "$json" "\"host\":\"$x\"[^}]*\"hold\":\"host\",\"reason\":\"kernel update\"" \
        "$peer: status --json: $x holds it, held by the host, for kernel update"
like "$(ns "$peer" fleetsem status reboot)" " $x +- +\\(host\\) .*kernel update" "$peer: status: the same"
check "$x's metrics: 1 host-held slot of reboot" wait_for 10 held_metric_is "$x" 1

# The agent restarted on the holding host: re-adopted and renewed.
pid=$(ns_prop "$x" fleetsemd.service MainPID)
ns "$x" systemctl restart fleetsemd.service || bail "cannot restart $x's agent"
new_pid=$(ns_prop "$x" fleetsemd.service MainPID)
check "$x's agent restarted (pid $pid, now $new_pid)" [ "$new_pid" != "$pid" -a "$new_pid" != 0 ]
check "... the slot still $x's" host_holds "$x"
before=$(expiry "$lease")
check "... renewed by the new agent" wait_for 15 sh -c "[ \"\$(redis-cli -s '$REDIS_SOCK' ZSCORE 'fleetsem:{reboot}:holders' $lease)\" != '$before' ]"
is "$(record reboot "$lease" 4)" "$token" "... with its token"
check "... counted by the new agent" wait_for 10 held_metric_is "$x" 1
check "... and the others wait on" still_after 4 others_wait "$x"

# Root's revoke --now from another host: the next host goes on, and,
# unhealthy too, holds after its reboot.
ns "$peer" fleetsem revoke --now "$lease" >/dev/null; rc=$?
is "$rc" 0 "$peer: fleetsem revoke --now $x's slot: exit 0"
check "$x's agent lets it go" wait_for 15 held_metric_is "$x" 0
back_twice() { [ "$(boots "$1")" = 2 ]; }
second_back() {
        local h
        for h in $others; do back_twice "$h" && echo "$h"; done | grep -m1 .
}
check "another host rebooted" wait_for 120 second_back
y=$(second_back)
z=$(for h in $others; do [ "$h" = "$y" ] || echo "$h"; done)
ns_wait_booted "$y"
check "$y: unhealthy, its fleetsem-reboot-done.service failed" \
        wait_for 60 sh -c "[ \"\$(nsenter -t $(ns_leader "$y") -a systemctl show -P Result fleetsem-reboot-done.service)\" = exit-code ]"
check "Redis: $y holds the slot" host_holds "$y"
lease=$(lease_of)
token=$(record reboot "$lease" 4)
check "$y's agent runs after the failed --done, and renews the slot" agent_renews "$y" "$lease"
is "$(boots "$x") $(boots "$z")" "2 1" "$x rebooted once, $z not yet"

# Redis restarted empty while $y is up and holding: re-asserted. (The
# agents may begin a new epoch before anything here looks: that it is a
# new one shows the restart lost the old.)
epoch0=$(rcli GET fleetsem:epoch)
stop_redis
start_redis
reset_ms=$(now_ms)
new_epoch() { local e; e=$(rcli GET fleetsem:epoch); [ -n "$e" ] && [ "$e" != "$epoch0" ]; }
check "Redis restarted empty: the agents begin a new epoch" wait_for 20 new_epoch
check "$y's slot is re-asserted" wait_for 20 host_holds "$y"
is "$(lease_of)" "$lease" "... the same lease"
is "$(record reboot "$lease" 4)" "$token" "... with its token"
z_waits() { [ "$(boots "$z")" = 1 ] && [ "$(waiters reboot)" = 1 ]; }
check "$z is back in line, not rebooted" wait_for 20 z_waits
check "$y's metrics: still 1 host-held slot of reboot" wait_for 10 held_metric_is "$y" 1

# $y healthy gives it back; $z waits out the reset's 30 s, then goes.
touch "$T/$y/lib/healthy" "$T/$z/lib/healthy"
ns "$y" systemctl start fleetsem-reboot-done.service || bail "cannot start $y's fleetsem-reboot-done.service"
check "$y gave its slot back" wait_for 60 sh -c "[ \$(redis-cli -s '$REDIS_SOCK' ZCARD 'fleetsem:{reboot}:holders') = 0 ]"
is "$(ns_prop "$y" fleetsem-reboot-done.service Result)" success "$y: fleetsem-reboot-done.service succeeded"
left=$(( (reset_ms + 30000 - $(now_ms)) / 1000 - 2 ))
# headroom: no deadline: what must not happen within the reset's 30 s,
# watched for what is left of them (its last 25 s on 2 cores at a load of
# 16: a load makes the watch shorter, never the verdict wrong).
if [ "$left" -gt 0 ]; then
        check "$z is granted nothing within 30 s of the reset (watched for its last $left s)" still_after "$left" z_waits
else
        echo "# $z not watched for the reset's 30 s: they were over before $y gave its slot back"
fi
all_back() {
        local h
        for h in $HOSTS; do [ "$(boots "$h")" = 2 ] || return 1; done
        [ "$(holders reboot)" = 0 ] && [ "$(waiters reboot)" = 0 ]
}
check "$z then rebooted and gave the slot back" wait_for 180 all_back
kill "$sampler"; wait "$sampler" 2>/dev/null     # cleanup
ns_check_in_turn $HOSTS
ns_wait_booted "$z"
is "$(ns_prop "$z" fleetsem-reboot-done.service ConditionResult) $(ns_prop "$z" fleetsem-reboot-done.service Result)" "yes success" \
        "$z: fleetsem-reboot-done.service ran and succeeded"
for h in $y $z; do
        check "$h: its state is gone" test ! -e "$T/$h/lib/reboot-reboot"
done
check "$x: its state is kept (revoked, never healthy)" test -e "$T/$x/lib/reboot-reboot"
is "$(boots "$x")" 2 "$x rebooted once, not again"

ns_done_testing
