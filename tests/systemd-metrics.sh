#!/bin/bash
# The shipped fleetsem-metrics.service and .timer under a real systemd, as
# hardened as they ship: root without any capability, the service writes
# node_exporter's textfile into its directory as Debian lays it out (root's,
# in a parent the collector's user owns), whole and 0644, with the values of
# a slot held on the host; when that user puts a directory of its own or a
# link in its place, the service fails and writes nothing; the timer is off
# until enabled, then fires.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-nspawn.sh"
require promtool

start_redis
ns_boot h1
ns_unit h1 fleetsem-metrics.service <"$BUILD/systemd/fleetsem-metrics.service"
ns_unit h1 fleetsem-metrics.timer <"$SRC/systemd/fleetsem-metrics.timer"
ns h1 systemctl daemon-reload
is "$(ns h1 systemctl is-enabled fleetsem-metrics.timer)" disabled "the timer is off until enabled"

is "$(ns_prop h1 fleetsem-metrics.service CapabilityBoundingSet)" "" "the service has no capability at all"

# node_exporter's directory as Debian's package makes it: root's, 0755, in
# /var/lib/prometheus, which the collector's user (here nobody) owns.
ns h1 sh -c 'mkdir -p /var/lib/prometheus/node-exporter && chown nobody:nogroup /var/lib/prometheus &&
        chmod 755 /var/lib/prometheus /var/lib/prometheus/node-exporter'
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

# The collector's user owns the parent: it may put a directory of its own,
# or a link to one of root's, where node_exporter's was. The service writes
# into neither, and says why.
# run_refused WHAT: the service fails, the journal says WHAT after the
# start. (Not matched by _SYSTEMD_INVOCATION_ID: journald reads a line's
# unit and invocation from the sender's cgroup, and a busy journald may read
# the line of a process that has already exited, when neither is there. The
# pattern is the message whole, and the cursor leaves out earlier runs.)
run_refused() {
        local what=$1 cur
        cur=$(journal h1 -n 1 --show-cursor -o cat | sed -n 's/^-- cursor: //p')
        [ -n "$cur" ] || bail "no cursor in h1's journal"
        ns h1 systemctl start fleetsem-metrics.service 2>/dev/null
        check "the service fails" [ "$?" != 0 ]
        is "$(ns_prop h1 fleetsem-metrics.service Result)/$(ns_prop h1 fleetsem-metrics.service ExecMainStatus)" exit-code/73 \
                "... with exit status 73"
        check "... saying: $what" wait_for 10 sh -c 'nsenter -t "$1" -a -- journalctl --no-pager -q -o cat --after-cursor="$2" |
                grep -qE -- "$3"' - "$(ns_leader h1)" "$cur" "$what"
        journal h1 --after-cursor="$cur" -o cat | grep -i refusing | sed 's/^/# journal: /'
}
ns h1 mv /var/lib/prometheus/node-exporter /var/lib/prometheus/old
ns h1 setpriv --reuid=nobody --regid=nogroup --clear-groups mkdir -m 755 /var/lib/prometheus/node-exporter
run_refused "Refusing to write .*: /var/lib/prometheus/node-exporter belongs to uid [0-9]+, not to root or to uid 0"
is "$(ns h1 ls -A /var/lib/prometheus/node-exporter)" "" "... and writes nothing into the collector user's directory"
ns h1 rmdir /var/lib/prometheus/node-exporter
ns h1 mkdir -m 755 /etc/precious
ns h1 setpriv --reuid=nobody --regid=nogroup --clear-groups ln -s /etc/precious /var/lib/prometheus/node-exporter
run_refused "Refusing to write .*: /var/lib/prometheus/node-exporter is a symbolic link"
is "$(ns h1 ls -A /etc/precious)" "" "... and writes nothing where the link points"
ns h1 rm /var/lib/prometheus/node-exporter
ns h1 mv /var/lib/prometheus/old /var/lib/prometheus/node-exporter

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
