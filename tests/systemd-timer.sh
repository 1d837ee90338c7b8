#!/bin/bash
# A timer firing on three hosts at the same moment, its service limited to
# one run at a time fleet-wide with --skip: one runs, two skip, none fails.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-nspawn.sh"

start_redis
ns_boot h1 h2 h3
EV=$T/shared/events

# All hosts share the clock: the same calendar time fires on all three.
at=$(date -d "@$(( $(date +%s) + 8 ))" '+%Y-%m-%d %H:%M:%S')
for h in h1 h2 h3; do
        ns_unit "$h" report.service <<'EOF'
[Service]
Type=oneshot
ExecStart=/bin/sh -c 'echo "ran %H $${FLEETSEM_TOKEN} $$(date +%%s%%N)" >>/run/fleetsem-test/events; sleep 3'
EOF
        ns_unit "$h" report.timer <<EOF
[Timer]
OnCalendar=$at
AccuracySec=1us
EOF
        ns "$h" fleetsem limit --skip report.service 1 >/dev/null
        ns "$h" systemctl start report.timer
done
like "$(ns h1 cat /etc/systemd/system/report.service.d/50-fleetsem.conf)" 'ExecCondition=\+/usr/local/bin/fleetsem acquire --slots 1 --skip report' \
        "limit --skip writes an ExecCondition="
fired() {
        local h
        for h in h1 h2 h3; do
                [ "$(ns_prop "$h" report.service ConditionTimestampMonotonic)" != 0 ] || return 1
        done
}
settled() {
        local h
        for h in h1 h2 h3; do
                [ "$(ns_prop "$h" report.service ActiveState)" != activating ] || return 1
        done
}
check "the timers fired on all three hosts" wait_for 20 fired
check "all three are done" wait_for 10 settled
is "$(grep -c '^ran ' "$EV")" 1 "exactly one host ran the report"
ran=$(awk '$1 == "ran" { print $2 }' "$EV")
skipped=0
for h in h1 h2 h3; do
        [ "$h" = "$ran" ] && continue
        is "$(ns_prop "$h" report.service ConditionResult)" no "$h: the condition failed (skipped, not run)"
        like "$(journal "$h" -u report.service)" "skipped|Condition check resulted in" "$h: the journal records the skip"
        skipped=$((skipped + 1))
done
is "$skipped" 2 "two hosts skipped"
for h in h1 h2 h3; do
        is "$(ns_prop "$h" report.service ActiveState)" inactive "$h: no unit in failed state"
done
is "$(holders report) $(waiters report)" "0 0" "the slot is free again, nobody in line"

ns_done_testing
