#!/bin/bash
# Real reboots, one at a time, as the shipped units do them: three booted
# hosts with the reboot units installed (fleetsem-reboot.timer off until
# enabled, fleetsem-reboot-done.service wanted at boot), a fleet limit of 1
# on "reboot", and /run/reboot-required with its .pkgs on each, as a
# kernel package leaves them. fleetsem-reboot.service is started on all
# three at once (what the timer does in its window); each host waits its
# turn, records the packages as its reason, reboots through logind (nspawn
# exits 133 and the host boots again), comes back, and its
# fleetsem-reboot-done.service gives the slot back once the system runs;
# then the next. Never two down at once: Redis never counts two holders,
# and each host went down while it held the slot. Back up, with
# /run/reboot-required gone with the boot, the service does nothing.
TTL=3s
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-nspawn.sh"

HOSTS="h1 h2 h3"
start_redis
ns_boot_rebooting $HOSTS

ns h1 fleetsem fleet-limit reboot 1 >/dev/null || bail "cannot set the fleet limit"

ns_sample_holders reboot & sampler=$!

for h in $HOSTS; do
        is "$(ns "$h" systemctl is-enabled fleetsem-reboot.timer)" disabled "$h: fleetsem-reboot.timer is off until enabled"
        ns "$h" sh -c 'touch /run/reboot-required && echo linux-image-6.1.0-99-amd64 >/run/reboot-required.pkgs' ||
                bail "cannot write $h's /run/reboot-required"
        ns "$h" systemctl start --no-block fleetsem-reboot.service || bail "cannot start fleetsem-reboot.service on $h"
done
# The reason Redis keeps for the holder: the unit's, with the packages.
holder_gives_pkgs() {
        local lease
        lease=$(rcli ZRANGE "fleetsem:{reboot}:holders" 0 0)
        [ -n "$lease" ] && record reboot "$lease" | grep -o 'reason=[^ ]*' | grep -q 'linux-image-6\.1\.0-99-amd64'
}
check "a holder's reason is the unit's, with the packages" wait_for 60 holder_gives_pkgs

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

# Back up, nothing is required any more: the unit's condition says so.
ns h1 systemctl start fleetsem-reboot.service || bail "cannot start fleetsem-reboot.service on h1 again"
is "$(ns_prop h1 fleetsem-reboot.service ConditionResult)" no "h1: without /run/reboot-required the service does not run"
is "$(boots h1)$(holders reboot)$(waiters reboot)" "200" "... h1 booted twice in all, and took nothing"

ns_done_testing
