#!/bin/bash
# Budgets count units: nobody, allowed pub-*, may not take the whole of a
# name with one heavy lease. Its weight is capped by max_weight_per_user
# (1 by default; code=limit, nothing in Redis), and once that is raised its
# leases count their weights against max_leases_per_user (4 here): weight 3
# holds, 2 more are refused, 1 more is granted. Root is bound by neither.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-security.sh"

RAW="$T/agent-raw.py"
cp "$(dirname "$0")/agent-raw.py" "$RAW"
chmod 644 "$RAW"
# nobody_fs ARGS...: fleetsem as nobody, against host a's agent.
nobody_fs() { as_nobody env FLEETSEM_NAMESPACE="$NSBASE-a" "$FLEETSEM" "$@"; }
# nobody_raw LINE: a raw request as nobody to host a's agent, its reply
# decoded (field values are %-encoded on the wire).
nobody_raw() {
        as_nobody /usr/bin/python3 "$RAW" "$NSBASE-a" "$1" |
                python3 -c 'import sys, urllib.parse; sys.stdout.write(urllib.parse.unquote(sys.stdin.read()))'
}
lease() { printf '%032x' "$1"; }
# What nobody's commands leave, to show that they ran.
OUT="$T/out"
mkdir "$OUT"
chown nobody "$OUT"
reloaded() { [ "$(grep -c 'Reloaded ' "$T/agent-a.log")" -ge "$1" ]; }

printf 'allow = pub-* nobody\nmax_leases_per_user = 4\n' >"$T/agent.conf"
start_redis
start_agent a --config "$T/agent.conf"

# 1. By default nobody may not ask for more than one unit.
out=$(nobody_fs run --slots 10 --weight 10 pub-x -- touch "$OUT/heavy-ran" 2>&1)
is "$?" 77 "nobody's --weight 10 is refused (77)${out:+: $out}"
like "$out" "may not ask for weight 10 on this host \(max_weight_per_user is 1\)" "... naming max_weight_per_user"
check "... and its command did not run" test ! -e "$OUT/heavy-ran"
is "$(holders pub-x) $(waiters pub-x)" "0 0" "... and Redis holds nothing of it"
like "$(nobody_raw "ACQUIRE name=pub-x slots=10 lease=$(lease 1) wait=0 weight=10")" \
        "^ERROR code=limit message=uid $NOBODY_UID may not ask for weight 10 on this host \(max_weight_per_user is 1\)" \
        "on the wire: code=limit"
fs a run --slots 10 --weight 10 pub-root -- touch "$T/root-ran"
is "$?" 0 "root's --weight 10 is granted"
check "... and its command ran" test -e "$T/root-ran"

# 2. Raised: nobody's units count against max_leases_per_user.
printf 'allow = pub-* nobody\nmax_leases_per_user = 4\nmax_weight_per_user = 10\n' >"$T/agent.conf"
kill -HUP "$(agent_pid a)"
check "the agent reloads the raised max_weight_per_user" wait_for 10 reloaded 1
# (setpriv itself, not as_nobody: $! is then fleetsem's pid.)
setpriv --reuid=nobody --regid=nogroup --clear-groups env FLEETSEM_NAMESPACE="$NSBASE-a" \
        "$FLEETSEM" run --slots 10 --weight 3 pub-x -- sleep 100 &
held=$!
check "nobody's weight 3 is granted" wait_for 10 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{pub-x}:holders') = 1 ]"
like "$(fs a status --json pub-x)" "\"uid\":$NOBODY_UID,\"user\":\"nobody\",\"slots\":10,\"weight\":3" \
        "status --json shows nobody's holder of weight 3"
out=$(nobody_fs run --slots 10 --weight 2 pub-y -- touch "$OUT/two-ran" 2>&1)
is "$?" 77 "nobody's weight 2 more is refused: 3 + 2 > 4 (77)${out:+: $out}"
check "... and its command did not run" test ! -e "$OUT/two-ran"
is "$(holders pub-y) $(waiters pub-y)" "0 0" "... and Redis holds nothing of it"
like "$(nobody_raw "ACQUIRE name=pub-y slots=10 lease=$(lease 2) wait=0 weight=2")" \
        "^ERROR code=limit message=uid $NOBODY_UID holds or waits for 3 units on this host already; 2 more would pass max_leases_per_user \(4\)" \
        "on the wire: code=limit, counting units"
out=$(nobody_fs run --slots 10 --weight 1 pub-y -- touch "$OUT/one-ran" 2>&1)
is "$?" 0 "nobody's weight 1 more is granted: 3 + 1 = 4${out:+: $out}"
check "... and its command ran" test -e "$OUT/one-ran"
fs a run --slots 10 --weight 7 pub-x -- true
is "$?" 0 "root's weight 7 beside nobody's 3 is granted: root counts no units"

kill "$held"
wait "$held" 2>/dev/null
check "nobody's slot goes with its run" wait_for 10 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{pub-x}:holders') = 0 ]"
done_testing
