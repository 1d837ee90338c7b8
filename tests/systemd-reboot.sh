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
unit_exec=$(sed -n 's/^ExecStart=//p' "$BUILD/systemd/fleetsemd.service")
for h in $HOSTS; do
        ns_config "$h"
        mkdir -p "$T/$h/lib"
        # The shipped units bound in, as ns_boot does; the agent's socket
        # and the done service wanted on every boot (systemd.wants= on
        # PID 1's command line: the overlay forgets systemctl enable).
        ns_launch_rebooting "$h" \
                --bind-ro="$FLEETSEMD:$unit_exec" \
                --bind-ro="$FLEETSEM:/usr/local/bin/fleetsem" \
                --bind-ro="$BUILD/systemd/fleetsemd.service:/etc/systemd/system/fleetsemd.service" \
                --bind-ro="$SRC/systemd/fleetsem.socket:/etc/systemd/system/fleetsem.socket" \
                --bind-ro="$BUILD/systemd/fleetsem-reboot-done.service:/etc/systemd/system/fleetsem-reboot-done.service" \
                --bind-ro="$T/$h/etc:/etc/fleetsem" \
                --bind="$T/$h/lib:/var/lib/fleetsem" \
                systemd.wants=fleetsem.socket systemd.wants=fleetsem-reboot-done.service
done
for h in $HOSTS; do ns_wait_booted "$h"; done
boots() { grep -c ' boot$' "$T/boots-$1"; }

ns h1 fleetsem fleet-limit reboot 1 >/dev/null || bail "cannot set the fleet limit"

# sample: every 20 ms until killed, "MS COUNT HOST" of reboot's holders
# as Redis has them.
sample() {
        local lease
        while :; do
                lease=$(redis-cli -s "$REDIS_SOCK" ZRANGE 'fleetsem:{reboot}:holders' 0 -1 | head -n1)
                echo "$(date +%s%3N) $(redis-cli -s "$REDIS_SOCK" ZCARD 'fleetsem:{reboot}:holders')" \
                        "$( [ -n "$lease" ] && redis-cli -s "$REDIS_SOCK" HGET 'fleetsem:{reboot}:clock' "$lease" | cut -d' ' -f1)"
                sleep 0.02      # not synchronisation: the sampler's period
        done >>"$T/held"
}
sample & sampler=$!

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

is "$(awk '$2 > m { m = $2 } END { print m + 0 }' "$T/held")" 1 "Redis never counted two holders of reboot"
# Each host went down (its second boot began) while it held the slot: the
# last sample before that moment names it.
for h in $HOSTS; do
        at=$(sed -n '2s/ boot$//p' "$T/boots-$h")
        is "$(awk -v t="$at" '$1 <= t { h = $3 } END { print h }' "$T/held")" "$h" "$h rebooted while holding the slot"
done
# In turn: the holders seen, each one stretch, three hosts.
order=$(awk '$3 != "" && $3 != last { print $3; last = $3 }' "$T/held" | tr '\n' ' ')
like "$order" '^h[123] h[123] h[123] $' "the slot went to each host once, in turn ($order)"
for h in $HOSTS; do
        ns_wait_booted "$h"
        is "$(ns_prop "$h" fleetsem-reboot-done.service Result)" success "$h: fleetsem-reboot-done.service succeeded"
        like "$(journal "$h" -u fleetsem-reboot-done.service)" "Released this host's slot of reboot" \
                "$h: its journal says it gave the slot back"
        check "$h: its state is gone" test ! -e "$T/$h/lib/reboot-reboot"
done

ns_done_testing
