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
# Every host is degraded before and after by the same failed unit
# (fail-old.service fails at each boot): healthy all the same, and --done
# names it. Then h1, with a unit that fails only after its next reboot
# (fail-new.service), reboots again: degraded by a new unit, unhealthy, it
# keeps the slot, and --done names the unit. A fourth host (h4), whose
# done service is not enabled, refuses to reboot, --dry-run too, with the
# command that fixes it; enabled, it would go.
TTL=3s
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-nspawn.sh"

HOSTS="h1 h2 h3"
start_redis
mkdir -p "$T/units"
printf '[Service]\nType=oneshot\nExecStart=/bin/false\n' >"$T/units/fail-old.service"
printf '[Service]\nType=oneshot\nExecStart=/bin/sh -c "! test -e /var/lib/fleetsem/fail-new"\n' \
        >"$T/units/fail-new.service"
NS_REBOOT_OPTS=(--bind-ro="$T/units/fail-old.service:/etc/systemd/system/fail-old.service"
        --bind-ro="$T/units/fail-new.service:/etc/systemd/system/fail-new.service"
        systemd.wants=fail-old.service systemd.wants=fail-new.service)
NS_DONE_OFF=h4
ns_boot_rebooting $HOSTS h4

# h4: its done service not enabled, nothing would give the slot back.
is "$(ns h4 systemctl is-system-running)" degraded "h4 is degraded (fail-old.service)"
out=$(ns h4 fleetsem reboot --slots 1 2>&1); rc=$?
is "$rc" 78 "h4: fleetsem reboot with fleetsem-reboot-done.service not enabled: refused, 78"
like "$out" "Refusing to reboot: fleetsem-reboot-done.service is disabled.*systemctl enable fleetsem-reboot-done.service" \
        "... with the command that fixes it"
out=$(ns h4 fleetsem reboot --slots 1 --dry-run 2>&1); rc=$?
is "$rc" 78 "h4: --dry-run: 78 too"
like "$out" "Would refuse: fleetsem-reboot-done.service is disabled" "... and says so"
like "$out" "Units failed now, which --done would not count against the host: fail-old.service" \
        "... and names the units failed now"
ns h4 systemctl enable -q fleetsem-reboot-done.service || bail "cannot enable h4's done service"
out=$(ns h4 fleetsem reboot --slots 1 --dry-run 2>&1); rc=$?
is "$rc" 0 "h4: enabled, --dry-run: 0"
is "$(boots h4)$(holders reboot)$(waiters reboot)" "100" "... h4 never rebooted, and nothing was taken"

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
        like "$(journal "$h" -u fleetsem-reboot-done.service)" \
                "degraded by units that had failed before the reboot too \\(not counted\\): fail-old.service" \
                "$h: degraded by fail-old.service before and after: healthy, and it says so"
        check "$h: its state is gone" test ! -e "$T/$h/lib/reboot-reboot"
done

# Back up, nothing is required any more: the unit's condition says so.
ns h1 systemctl start fleetsem-reboot.service || bail "cannot start fleetsem-reboot.service on h1 again"
is "$(ns_prop h1 fleetsem-reboot.service ConditionResult)" no "h1: without /run/reboot-required the service does not run"
is "$(boots h1)$(holders reboot)$(waiters reboot)" "200" "... h1 booted twice in all, and took nothing"

# h1 again, with a unit that fails only after this reboot: unhealthy.
touch "$T/h1/lib/fail-new"
ns h1 touch /run/reboot-required || bail "cannot write h1's /run/reboot-required"
ns h1 systemctl start --no-block fleetsem-reboot.service || bail "cannot start fleetsem-reboot.service on h1"
check "h1 rebooted a second time" wait_for 120 sh -c "[ \$(grep -c ' boot\$' '$T/boots-h1') = 3 ]"
ns_wait_booted h1
check "h1: degraded by fail-new.service, its fleetsem-reboot-done.service failed" \
        wait_for 60 sh -c "[ \"\$(nsenter -t $(ns_leader h1) -a systemctl show -P Result fleetsem-reboot-done.service)\" = exit-code ]"
is "$(ns_prop h1 fleetsem-reboot-done.service ExecMainStatus)" 1 "... with exit 1 (not healthy)"
like "$(journal h1 -u fleetsem-reboot-done.service)" "degraded by units that had not failed before the reboot: fail-new.service" \
        "... its journal names the new failed unit"
is "$(holders reboot)" 1 "Redis: h1 keeps the slot"
ns h1 fleetsem reboot --release >/dev/null || bail "h1 could not give its slot back"

ns_done_testing
