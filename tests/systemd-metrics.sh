#!/bin/bash
# The shipped fleetsem-metrics.service and .timer under a real systemd, as
# hardened as they ship: the service writes node_exporter's textfile into a
# directory another user owns, whole and 0644, with the values of a slot
# held on the host; the timer is off until enabled, then fires.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-nspawn.sh"
require promtool

start_redis
ns_boot h1
ns_unit h1 fleetsem-metrics.service <"$BUILD/systemd/fleetsem-metrics.service"
ns_unit h1 fleetsem-metrics.timer <"$SRC/systemd/fleetsem-metrics.timer"
ns h1 systemctl daemon-reload
is "$(ns h1 systemctl is-enabled fleetsem-metrics.timer)" disabled "the timer is off until enabled"

# node_exporter's directory, owned by its user, not root.
ns h1 sh -c 'mkdir -p /var/lib/prometheus/node-exporter && chown nobody:nogroup /var/lib/prometheus/node-exporter && chmod 755 /var/lib/prometheus/node-exporter'
ns h1 systemd-run --unit=job --quiet fleetsem run --slots 3 metered -- sleep 600
check "a job holds a slot of metered" wait_for 10 sh -c "[ \"\$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{metered}:holders')\" = 1 ]"

ns h1 systemctl start fleetsem-metrics.service
is "$?" 0 "fleetsem-metrics.service runs"
is "$(ns_prop h1 fleetsem-metrics.service Result)" success "... and succeeds"
prom=$(ns h1 cat /var/lib/prometheus/node-exporter/fleetsem.prom)
like "$prom" 'fleetsem_slots_held\{name="metered",scope="host"\} 1' "the file holds this host's slot"
like "$prom" 'fleetsem_limit\{name="metered",scope="fleet"\} 3' "... and the fleet's limit"
promtool check metrics <<<"$prom" >/dev/null 2>&1
is "$?" 0 "promtool accepts it"
is "$(ns h1 stat -c '%a %U' /var/lib/prometheus/node-exporter/fleetsem.prom)" "644 root" "0644"
is "$(ns h1 ls -A /var/lib/prometheus/node-exporter)" "fleetsem.prom" "no temporary file left"

# The schedule as shipped, as systemd read it: 30 s after boot, then every
# 30 s. The container booted moments ago; so as not to wait those 30 s, a
# drop-in starts the first run a second after the timer does.
sched=$(ns_prop h1 fleetsem-metrics.timer TimersMonotonic)
like "$sched" 'OnBootUSec=30s' "as shipped, it first fires 30 s after boot"
like "$sched" 'OnUnitActiveUSec=30s' "... then every 30 s"
ns_unit h1 fleetsem-metrics.timer.d/soon.conf <<<$'[Timer]\nOnBootSec=\nOnActiveSec=1s\nOnUnitActiveSec=30s'
ns h1 systemctl daemon-reload
ns h1 rm /var/lib/prometheus/node-exporter/fleetsem.prom
ns h1 systemctl enable --now fleetsem-metrics.timer >/dev/null 2>&1
is "$(ns h1 systemctl is-active fleetsem-metrics.timer)" active "enabled, the timer runs"
check "it fires, and the file is written again" wait_for 60 ns h1 test -s /var/lib/prometheus/node-exporter/fleetsem.prom

ns_done_testing
