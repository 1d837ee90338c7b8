#!/bin/bash
# Real reboots, one at a time: three booted hosts with the shipped units
# (fleetsem-reboot-done.service enabled), a fleet limit of 1 on "reboot",
# and fleetsem reboot started on all three at once. Each reboots through
# logind (nspawn exits 133 and the host boots again), comes back, and its
# fleetsem-reboot-done.service gives the slot back once the system runs
# and its health command passes; then the next. Never two down at once:
# Redis never counts two holders, and each host went down while it held
# the slot.
TTL=3s
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-nspawn.sh"

HOSTS="h1 h2 h3"
start_redis
ns_boot_rebooting $HOSTS

ns h1 fleetsem fleet-limit reboot 1 >/dev/null || bail "cannot set the fleet limit"

ns_sample_holders reboot & sampler=$!

for h in $HOSTS; do
        ns "$h" systemd-run -q --unit=roll --service-type=exec \
                /usr/local/bin/fleetsem reboot --wait 300s --reason "kernel update" \
                --health "systemctl is-active fleetsem.socket" || bail "cannot start fleetsem reboot on $h"
done

all_back() {
        local h
        for h in $HOSTS; do [ "$(boots "$h")" = 2 ] || return 1; done
        [ "$(holders reboot)" = 0 ] && [ "$(waiters reboot)" = 0 ]
}
check "all three hosts rebooted once, one after the other, and gave the slot back" wait_for 240 all_back
kill "$sampler"; wait "$sampler" 2>/dev/null     # cleanup

ns_check_in_turn $HOSTS
for h in $HOSTS; do
        ns_wait_booted "$h"
        is "$(ns_prop "$h" fleetsem-reboot-done.service Result)" success "$h: fleetsem-reboot-done.service succeeded"
        like "$(journal "$h" -u fleetsem-reboot-done.service)" "Released this host's slot of reboot" \
                "$h: its journal says it gave the slot back"
        check "$h: its state is gone" test ! -e "$T/$h/lib/reboot-reboot"
done

ns_done_testing
