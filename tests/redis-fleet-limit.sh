#!/bin/bash
# The fleet limit, on two agents ("hosts") and Redis: root sets a name's
# limit in one place (fleetsem fleet-limit) and callers on both hosts
# that ask for no number of slots share it; without one they are refused
# (exit 78). The limit in force is the lowest of it and what callers
# asked for. Lowering it stops no holder; raising it grants waiters at
# once; removing it refuses those that asked for no number. Nobody may set
# it; anyone may read it; status, its JSON and the journal say who set it,
# from where and why; it keeps the name's keys in Redis while it is set;
# bad input is refused and changes nothing.
TTL=2s
. "$(dirname "$0")/lib.sh"

start_redis
start_agent a
start_agent b

# job HOST NAME TAG [fleetsem run options]: no --slots (lib.sh).
job() { tagged_job "$@"; }
entered() { grep -c '^enter' "$T/order" 2>/dev/null || echo 0; }

# ---- No limit anywhere: refused, saying what to do ------------------------------
err=$(fs a run --no-wait f -- touch "$T/ran" 2>&1); rc=$?
is "$rc" 78 "a caller that asks for no number of slots, with no fleet limit, is refused (78)"
like "$err" "f: no fleet limit is set for this name: ask for a number of slots, or set one \(fleetsem fleet-limit NAME N\)" \
        "... saying what to do"
check "... and its command did not run" [ ! -e "$T/ran" ]
is "$(holders f) $(waiters f)" "0 0" "... and nothing of it stays in Redis"
is "$(fs b fleet-limit f)" "f: no fleet limit" "fleet-limit NAME says there is none"

# ---- Set in one place, shared by both hosts --------------------------------------
out=$(fs a fleet-limit f 2 --reason "two backups at most" 2>&1); rc=$?
is "$rc" 0 "root sets the fleet limit of f to 2 on a"
is "$out" "f: fleet limit 2 (was none); 0 waiter(s) granted at once." "... and is told so"
check "the journal says who set it, from where and why" grep -q \
        'Set the fleet limit of f to 2 for root (uid 0, pid [0-9]*) on a (two backups at most; it was none); 0 waiter(s) granted at once. \[name=f action=limit operator=root (uid 0, pid [0-9]*) on a reason=two backups at most\]' \
        "$T/agent-a.log"
like "$(fs b fleet-limit f)" '^f: fleet limit 2, set by root \(uid 0\) on a since [0-9-]+ [0-9:]+ UTC: two backups at most$' \
        "the other host reads it, with who, where, when and why"
prereq "root, setpriv and the user nobody" sh -c '[ "$(id -u)" = 0 ] && command -v setpriv && id nobody' &&
        asnobody() { local host=$1; shift; setpriv --reuid=nobody --regid=nogroup --clear-groups \
                env FLEETSEM_NAMESPACE="$NSBASE-$host" "$@"; }
like "$(asnobody b "$FLEETSEM" fleet-limit f)" '^f: fleet limit 2, set by root' "... and so may nobody"

job a f j1 & j1=$!
job b f j2 & j2=$!
check "a caller on each host gets a slot without --slots" wait_for 10 sh -c "[ \$(grep -c '^enter' '$T/order' 2>/dev/null) = 2 ]"
job a f j3 & j3=$!
check "a third one waits: the fleet limit is 2" wait_for 10 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{f}:queue') = 1 ]"
fs b run --no-wait f -- touch "$T/ran" 2>/dev/null
is "$?" 75 "one that does not wait is refused (75)"
st=$(fs b status f)
is "$(head -n 1 <<<"$st")" "f: 2 held, 1 waiting, limit 2" "status: the limit in force is the fleet limit"
like "$(sed -n 2p <<<"$st")" '^  Fleet limit: 2, set by root \(uid 0\) on a since [0-9-]+ [0-9:]+ UTC: two backups at most$' \
        "... and says who set the fleet limit"
like "$(sed -n 3p <<<"$st")" '^  Last action: limit by root \(uid 0\) on a at [0-9-]+ [0-9:]+ UTC: set to 2: two backups at most$' \
        "... and that this was the last action"
like "$st" "fleet +fleetsem" "... and that the callers asked for no number of their own"
like "$(fs a status --json f)" '"limit":2,"fleet_limit":2,"fleet_limit_set":"by root \(uid 0\) on a since [^"]*: two backups at most"' \
        "status --json too"

# ---- A caller that asks for less: the lowest is in force --------------------------
job b f j4 --slots 1 & j4=$!
check "one that asks for 1 waits behind j3" wait_for 10 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{f}:queue') = 2 ]"
is "$(fs a status f | head -n 1)" "f: 2 held, 2 waiting, limit 1" "the limit in force is the lowest asked (1 < 2)"

# ---- Raising it grants the waiters that fit, at once ------------------------------
out=$(fs b fleet-limit f 5 2>&1); rc=$?
is "$rc" 0 "root raises it to 5 on b"
# (j4 asks for 1 and 2 hold: nobody fits until it leaves the line.)
is "$out" "f: fleet limit 5 (was 2); 0 waiter(s) granted at once." \
        "... nobody fits while one in line asks for 1 and 2 hold"
touch "$T/go-j1" "$T/go-j2"
wait "$j1" "$j2"
check "once both holders end, j3 and then j4 get in, in line order" wait_for 10 sh -c "[ \$(grep -c '^enter' '$T/order') = 3 ]"
is "$(sed -n 3p "$T/order")" "enter j3" "... j3 first"
touch "$T/go-j3"; wait "$j3"
check "then j4" wait_for 10 grep -qx 'enter j4' "$T/order"
touch "$T/go-j4"; wait "$j4"

: >"$T/order"
job a f k1 & k1=$!
job b f k2 & k2=$!
job a f k3 & k3=$!
check "with the fleet limit 5 and nobody asking less, three hold at once" wait_for 10 sh -c "[ \$(grep -c '^enter' '$T/order') = 3 ]"

# ---- Lowering it stops no holder --------------------------------------------------
is "$(fs a fleet-limit f 1 --reason "disk slow")" "f: fleet limit 1 (was 5); 0 waiter(s) granted at once." "root lowers it to 1"
job b f k4 & k4=$!
check "a newcomer waits" wait_for 10 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{f}:queue') = 1 ]"
three_in() { [ "$(entered) $(holders f)" = "3 3" ]; }
# A lease: the holders are renewed past it.
check "for a lease (2.2 s), the three holders run on and nobody else got in" still_after 2.2 three_in
touch "$T/go-k1" "$T/go-k2"; wait "$k1" "$k2"
still_waits() { [ "$(entered) $(holders f) $(waiters f)" = "3 1 1" ]; }
check "with 1 holder left of limit 1, the waiter still waits (0.5 s)" still_after 0.5 still_waits
touch "$T/go-k3"; wait "$k3"
check "once fewer hold than the limit, the waiter gets in" wait_for 10 grep -qx 'enter k4' "$T/order"
touch "$T/go-k4"; wait "$k4"

# ---- The name stays in Redis while the limit is set -------------------------------
is "$(redis-cli -s "$REDIS_SOCK" TTL 'fleetsem:{f}:clock')" -1 "the name's hash does not expire while it has a fleet limit"

# ---- Nobody may set or remove it; bad input changes nothing -----------------------
err=$(asnobody a "$FLEETSEM" fleet-limit f 9 2>&1); rc=$?
is "$rc" 77 "nobody may not set it (77)"
like "$err" "only root may set a fleet limit" "... and is told why"
check "the agent logs the refusal" grep -q "Refused to set the fleet limit of f for uid 65534: root only." "$T/agent-a.log"
is "$(asnobody a python3 "$(dirname "$0")/agent-raw.py" "$NSBASE-a" 'LIMIT name=f slots=0')" \
        "ERROR code=permission message=only%20root%20may%20set%20a%20fleet%20limit" "nobody's raw LIMIT is refused by the agent itself"
for bad in "0" "-1" "1000001" "2x" ""; do
        fs a fleet-limit f "$bad" >/dev/null 2>&1
        is "$?" 64 "fleet-limit f '$bad' is a usage error"
done
fs a fleet-limit 'bad name' 3 >/dev/null 2>&1
is "$?" 64 "an invalid name is a usage error"
fs a fleet-limit f >/dev/null --reason why 2>&1
is "$?" 64 "--reason without a value to set is a usage error"
like "$(raw a 'LIMIT name=f slots=x')" "^ERROR code=[a-z]+ message=invalid%20slots%20%280-1000000%29" "a raw LIMIT with bad slots is refused"
like "$(raw a 'LIMIT name=f')" "^ERROR code=[a-z]+ message=LIMIT%20needs%20name=%20and%20slots=" "... and one without slots"
like "$(fs a fleet-limit f)" '^f: fleet limit 1, set by root \(uid 0\) on a since [0-9-]+ [0-9:]+ UTC: disk slow$' \
        "after all of that, the limit is still 1"
out=$(fs a limit --fleet f 2>"$T/alias.err"); rc=$?
is "$rc $out" "0 $(fs a fleet-limit f)" "the old spelling, limit --fleet, still shows it"
like "$(cat "$T/alias.err")" '"fleetsem limit --fleet" is deprecated: use "fleetsem fleet-limit"' "... and says it is deprecated"

# ---- Removed: those that ask for no number are refused again ----------------------
job a f w1 & w1=$!
check "w1 holds" wait_for 10 grep -qx 'enter w1' "$T/order"
job b f w2 & w2=$!
check "w2 waits" wait_for 10 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{f}:queue') = 1 ]"
is "$(fs b fleet-limit f none --reason "limit in the drop-ins again")" "f: fleet limit removed (was 1); 0 waiter(s) granted at once." \
        "root removes it"
wait "$w2"
is "$?" 78 "the waiter that asked for no number is refused once no limit is left (78)"
like "$(cat "$T/run-w2.err")" "no fleet limit is set for this name" "... saying why"
check "the holder runs on" kill -0 "$w1"
is "$(holders f) $(waiters f)" "1 0" "Redis: the holder, nobody in line"
touch "$T/go-w1"; wait "$w1"
is "$?" 0 "the holder ends as it should"
check "the journal says who removed it and why" grep -q \
        'Removed the fleet limit of f for root (uid 0, pid [0-9]*) on b (limit in the drop-ins again; it was 1, set by root (uid 0) on a since' \
        "$T/agent-b.log"
check "the name's keys expire again once idle" wait_for 5 sh -c "[ \$(redis-cli -s $REDIS_SOCK TTL 'fleetsem:{f}:clock') -gt 0 ]"
done_testing
