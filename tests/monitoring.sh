#!/bin/bash
# What operators load into their monitoring: the Prometheus alerting rules
# (systemd/fleetsem-alerts.yml) pass promtool's check and its unit tests on
# fixtures (tests/fleetsem-alerts.test.yml); the Grafana dashboard
# (systemd/fleetsem-dashboard.json) is valid JSON whose every query is valid
# PromQL; both use only metrics a real agent writes; both are installed.
. "$(dirname "$0")/lib.sh"
require promtool
SRC=$(cd "$(dirname "$0")/.." && pwd)
RULES=$SRC/systemd/fleetsem-alerts.yml
DASH=$SRC/systemd/fleetsem-dashboard.json

# ---- Alerts ---------------------------------------------------------------------
out=$(promtool check rules "$RULES" 2>&1)
is "$?" 0 "promtool check rules: the alerting rules are valid"
like "$out" 'SUCCESS: 8 rules found' "... all eight of them"
out=$(cd "$SRC/tests" && promtool test rules fleetsem-alerts.test.yml 2>&1)
is "$?" 0 "promtool test rules: each alert fires on its fixture, and only then"
like "$out" 'SUCCESS' "... (${out//$'\n'/ })"
for a in FleetsemNameSaturated FleetsemLongWait FleetsemWaiterStuck FleetsemRedisDown FleetsemRenewalsLate FleetsemSlotLost \
        FleetsemRebootSlotHeld; do
        check "the fixtures test $a, firing and not" \
                [ "$(grep -c "alertname: $a\$" "$SRC/tests/fleetsem-alerts.test.yml")" -ge 2 ]
done

# ---- Dashboard --------------------------------------------------------------------
# Each query as a recording rule of a rules file promtool can check
# ($__rate_interval and the variables as Prometheus would get them from
# Grafana); the number of queries on stdout.
n=$(python3 - "$DASH" "$T/dashboard-rules.yml" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
exprs = [t["expr"].replace("$__rate_interval", "5m").replace("$instance", ".*").replace("$name", ".*")
         for p in d["panels"] for t in p["targets"]]
with open(sys.argv[2], "w") as f:
    f.write("groups:\n  - name: dashboard\n    rules:\n")
    for i, e in enumerate(exprs):
        f.write("      - record: dashboard:query%d\n        expr: %s\n" % (i + 1, json.dumps(e)))
print(len(exprs))
EOF
)
is "$?" 0 "the dashboard is valid JSON"
int_of n "$n"
check "... with a query in each of its panels ($n queries)" [ "$n" -ge 8 ]
out=$(promtool check rules "$T/dashboard-rules.yml" 2>&1)
is "$?" 0 "every dashboard query is valid PromQL (promtool)"
like "$out" "SUCCESS: $n rules found" "... all $n of them"
for w in "slots held" limit waiting quantiles "Grants per second" "connected to Redis" "Renewal lateness"; do
        check "the dashboard shows: $w" grep -qi "\"title\": \"[^\"]*$w" "$DASH"
done

# ---- Only metrics an agent writes -------------------------------------------------
start_redis
start_agent a
fs a run --slots 2 --no-wait monitored -- true
is "$?" 0 "an agent grants a slot (so every family has a value)"
fs a metrics >"$T/metrics"
is "$?" 0 "fleetsem metrics answers"
families=$(sed -n 's/^# TYPE \(fleetsem_[a-z_]*\) .*/\1/p' "$T/metrics" | sort -u)
check "... with its families ($(echo $families | wc -w))" [ "$(echo $families | wc -w)" -ge 12 ]
used=$(grep -ohE 'fleetsem_[a-z_]+' "$RULES" "$DASH" "$SRC/tests/fleetsem-alerts.test.yml" |
        sed -E 's/_(bucket|sum|count)$//' | sort -u)
unknown=$(comm -23 <(echo "$used") <(echo "$families") | tr '\n' ' ')
is "$unknown" "" "the alerts, their fixtures and the dashboard use only metrics the agent writes"

# ---- Installed where the docs say ---------------------------------------------------
[ -n "${BUILD_ROOT:-}" ] || bail "BUILD_ROOT (the meson build directory) is not set"
meson install -C "$BUILD_ROOT" --destdir "$T/dest" --no-rebuild >"$T/install.log" 2>&1
is "$?" 0 "meson install (into a scratch DESTDIR)"
for f in fleetsem-alerts.yml fleetsem-dashboard.json; do
        check "meson install puts $f in DATADIR/fleetsem" sh -c "find '$T/dest' -path '*/share/fleetsem/$f' | grep -q ."
        check "... and the Debian package ships it" grep -qx "usr/share/fleetsem/$f" "$SRC/debian/fleetsem.install"
done
done_testing
