#!/bin/bash
# A wait that is the reset grace explains itself. A new Redis (no fleetsem
# state: its first use) and one that lost its state grant nothing for a
# lease; fleetsem run, a PAM session, status, metrics and the agent's log
# say so at once, with why and for how long. And status's table is as wide
# as its values: 16-digit tokens, a long host name.
TTL=6s
. "$(dirname "$0")/lib.sh"
pam_setup
ME=$(id -un)
WHO=daemon      # (root's own sessions are never held back)

# A Redis as a new user's is: nothing in it (no seeded epoch, now or when
# it restarts).
REDIS_SEEDED=1
start_redis
start_agent a
NEW="holds no fleetsem state yet"

fs a run --slots 1 first -- echo ran >"$T/run.out" 2>"$T/run.err" &
job=$!
mkdir -p "$T/pam.d"
echo "session required $PAM_FLEETSEM namespace=$NSBASE-a agent_user=$ME slots=1 wait=30s" >"$T/pam.d/grace"
(echo close | LD_PRELOAD=$PRELOAD PAM_WRAPPER=1 PAM_WRAPPER_SERVICE_DIR="$T/pam.d" \
        "$PAM_SESSION" grace $WHO) >"$T/pam.out" 2>"$T/pam.log" &
session=$!

check "run says at once that no slot is granted for a while" wait_for 2 grep -q 'no slot is granted for another [0-9]' "$T/run.err"
like "$(cat "$T/run.err")" "first: no slot is granted for another [1-6]s.*: Redis $NEW" "... for how long (under the lease, 6 s) and why"
is "$(cat "$T/run.out")" "" "... and its command waits"
check "the PAM session is told the same as it waits" wait_for 2 grep -q "^info: fleetsem: login:$WHO: no slot is granted for another .*$NEW" "$T/pam.out"
log_lacks "$T/pam.out" '^open:' '^info: fleetsem: login:' "... and has not opened yet"
# Refused at once in the grace (wait=0, run --no-wait): told that no slot
# is granted yet and why, never that all slots are in use (none is held).
echo "session required $PAM_FLEETSEM namespace=$NSBASE-a agent_user=$ME slots=1" >"$T/pam.d/nowait"
(echo close | LD_PRELOAD=$PRELOAD PAM_WRAPPER=1 PAM_WRAPPER_SERVICE_DIR="$T/pam.d" \
        "$PAM_SESSION" nowait $WHO) >"$T/pam-nowait.out" 2>"$T/pam-nowait.log"
like "$(grep -v '^open:' "$T/pam-nowait.out")" "^error: fleetsem: login:$WHO: no slot is granted for another [0-9][^:]*: Redis $NEW \(its first use[^;]*; slots held before may still be in use until their leases run out; try again later\.$" \
        "a PAM session refused in the grace (wait=0) is told it is the first use, not that all slots are in use"
like "$(cat "$T/pam-nowait.out")" '^open: 6 ' "... PAM_PERM_DENIED"
out=$(fs a run --slots 1 --no-wait first-nowait -- true 2>&1); rc=$?
is "$rc" 75 "run --no-wait in the grace: 75"
like "$out" "first-nowait: no slot is granted for another [0-9][^:]*: Redis $NEW \(its first use" "... saying it is the first use"

st=$(fs a status)
like "$st" "No slot is granted for another [0-9].* \(until [0-9:]+\): Redis $NEW" "status shows the grace, its end and why"
json=$(fs a status --json)
is "$(python3 -c 'import json, sys; g = json.loads(sys.argv[1])["grace"]; print(0 < g["remaining_ms"] <= 6000, g["until_ms"] > 0, "'"$NEW"'" in g["reason"])' "$json")" \
        "True True True" "status --json: the grace's remaining_ms, until_ms and reason"
m=$(fs a metrics)
like "$m" 'fleetsem_reset_grace_seconds\{reason="new"\} [0-5]\.[0-9]+' "metrics: the grace left, with its reason"
like "$(cat "$T/agent-a.log")" "No slot is granted through Redis .* for another [0-9].*: Redis $NEW" "the agent logs it, with the reason"
like "$(cat "$T/agent-a.log")" "Redis at [^ ]+ $NEW \(epoch [0-9a-f]{32}\); a new Redis declared empty before the first agent \(fleetsem redis-init\) grants at once\." \
        "... and how a new Redis is spared it"

check "once the grace is over, the job runs" wait_for 20 grep -qx ran "$T/run.out"
wait "$job"
is "$?" 0 "... and succeeds"
check "... and the session opens" wait_for 5 grep -q '^open: 0' "$T/pam.out"
wait "$session"
is "$(fs a metrics | grep '^fleetsem_reset_grace_seconds')" "fleetsem_reset_grace_seconds 0" "metrics: no grace left, no reason"
like "$(fs a status --json)" '^\{"now_ms":[0-9]+,"redis":.*,"grace":null,' "status: no grace shown"

# Redis restarts empty under a holder: the grace again, for another reason.
fs a run --slots 3 held -- sleep 120 >/dev/null 2>&1 &
holder=$!
check "a job holds a slot" wait_for 5 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{held}:holders') = 1 ]"
stop_redis nosave
start_redis
check "the agent finds Redis lost its state, and re-asserts the holder" \
        wait_for 10 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{held}:holders') = 1 ]"
fs a run --slots 1 after-reset -- true >/dev/null 2>"$T/reset.err" &
late=$!
check "a new caller is told why it waits" wait_for 3 grep -q 'no slot is granted for another' "$T/reset.err"
like "$(cat "$T/reset.err")" "Redis lost its fleetsem state" "... that Redis lost its state"
like "$(fs a metrics)" 'fleetsem_reset_grace_seconds\{reason="reset"\} [0-9.]+' "metrics: reason=reset"
wait "$late"
is "$?" 0 "... and runs once the grace is over"

# Columns as wide as the values: a host name of 40 characters and tokens of
# 16 digits, from another agent.
run_agent host-with-a-rather-long-name.example.org --redis "unix:$REDIS_SOCK"
fs host-with-a-rather-long-name.example.org run --slots 3 held -- sleep 120 >/dev/null 2>&1 &
far=$!
check "another host holds a slot of the name" wait_for 5 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{held}:holders') = 2 ]"
fs a status held >"$T/table"
cat "$T/table" | sed 's/^/# /'
# Every header word starts a column: in each row, the character before it
# is a space and the one at it is not.
is "$(python3 - "$T/table" <<'EOF'
import re, sys
lines = open(sys.argv[1]).read().split("\n")
head = next(i for i, l in enumerate(lines) if "STATE" in l and "TOKEN" in l)
starts = [m.start() for m in re.finditer(r"\S+", lines[head])]
rows = [l for l in lines[head + 1:] if l.startswith("  ") and l.strip()]
bad = [(r, s) for r in rows for s in starts if len(r) <= s or r[s] == " " or r[s - 1] != " "]
print(len(rows), len(starts), "misaligned" if bad else "aligned")
EOF
)" "2 10 aligned" "status: both rows' ten columns line up under the header"
like "$(cat "$T/table")" "host-with-a-rather-long-name.example.org" "... with the long host name whole"

kill "$holder" "$far"
wait "$holder" "$far" 2>/dev/null
done_testing
