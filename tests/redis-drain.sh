#!/bin/bash
# Drain and undrain, on two agents ("hosts") and Redis: root drains a name
# fleet-wide; its holder runs on, renewed; a request that does not wait is
# refused, saying who drained it and why; waiters on both hosts keep their
# places and are granted nothing though a slot is free; status, its JSON and
# the metrics show the drain; nobody may drain or undrain; undrain grants
# the waiters at once, in the order they came; the journal says who did
# what, from where and why. Bad input is refused and changes nothing.
TTL=2s
. "$(dirname "$0")/lib.sh"

start_redis
start_agent a
start_agent b

# job HOST NAME TAG [fleetsem run options]: tagged_job with a limit of 2.
job() { tagged_job "$1" "$2" "$3" --slots 2 "${@:4}"; }

job a d h1 & h1=$!
check "h1 holds a slot of d (limit 2)" wait_for 10 grep -qx 'enter h1' "$T/order"

out=$(fs a drain d --reason "incident 42: disk full" 2>&1); rc=$?
is "$rc" 0 "root drains d"
like "$out" '^d is drained fleet-wide: no new slot is granted until "fleetsem undrain d"\.$' "... and is told so"
check "the journal says who drained d, from where and why" grep -q \
        'Drained d fleet-wide for root (uid 0, pid [0-9]*) on a: .*(incident 42: disk full). \[name=d action=drain operator=root (uid 0, pid [0-9]*) on a reason=incident 42: disk full\]' \
        "$T/agent-a.log"
is "$(fs a drain d --reason again | tail -n 1)" 'd is drained fleet-wide (it was already): no new slot is granted until "fleetsem undrain d".' \
        "draining it again says it was"

# A request that does not wait: refused, with who and why, on either host.
err=$(fs b run --slots 2 --no-wait d -- true 2>&1); rc=$?
is "$rc" 75 "b: a request that does not wait is refused (75)"
like "$err" "d is drained \(by root \(uid 0\) on a since [0-9-]+ [0-9:]+ UTC: again\); no new slot is granted until \"fleetsem undrain d\"" \
        "... saying who drained d, since when and why"

# Waiters on both hosts, though one slot is free: they queue, in order.
job b d w1 & w1=$!
check "w1 (on b) waits" wait_for 10 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{d}:queue') = 1 ]"
job a d w2 & w2=$!
check "w2 (on a) waits behind it" wait_for 10 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{d}:queue') = 2 ]"
check "w1 is told the name is drained, and waits" wait_for 5 grep -q 'd is drained (by root .*: again); .*; waiting\.' "$T/run-w1.err"
# Three renewals of the holder: it runs on; nobody else got in.
one_entered() { [ "$(grep -c enter "$T/order")" = 1 ]; }
check "a lease later (2.2 s), h1 still holds and nobody else got in (a slot is free)" still_after 2.2 one_entered
check "h1 runs on" kill -0 "$h1"
is "$(holders d) $(waiters d)" "1 2" "Redis: 1 holder, 2 waiters"

st=$(fs b status d)
is "$(head -n 1 <<<"$st" | sed 's/since [0-9-]* [0-9:]* UTC/since WHEN/')" \
        'd: 1 held, 2 waiting, limit 2; DRAINED by root (uid 0) on a since WHEN: again' \
        "status shows the drain, on the other host too"
is "$(sed -n 2p <<<"$st" | sed 's/at [0-9-]* [0-9:]* UTC/at WHEN/')" '  Last action: drain by root (uid 0) on a at WHEN: again' \
        "... and the last action on d: the second drain"
like "$(fs b status --json d)" '"drained":"by root \(uid 0\) on a since [0-9-]+ [0-9:]+ UTC: again","last_action":"drain by root \(uid 0\) on a at [0-9-]+ [0-9:]+ UTC: again"' \
        "... and its JSON"
like "$(fs b metrics)" 'fleetsem_drained\{name="d"\} 1' "the metrics: fleetsem_drained{name=\"d\"} 1"

# Nobody else may drain or undrain.
if prereq "root, setpriv and the user nobody" sh -c '[ "$(id -u)" = 0 ] && command -v setpriv && id nobody'; then
        asnobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups env FLEETSEM_NAMESPACE="$NSBASE-a" "$FLEETSEM" "$@"; }
        out=$(asnobody undrain d 2>&1); rc=$?
        is "$rc" 77 "nobody may not undrain (77)"
        like "$out" 'only root may drain or undrain a name' "... and is told why"
        out=$(asnobody drain other 2>&1); rc=$?
        is "$rc" 77 "nobody may not drain either"
        is "$(rcli HEXISTS 'fleetsem:{other}:clock' '!') $(holders d) $(waiters d)" "0 1 2" "... and nothing changed"
        check "the journal says who was refused" grep -q 'Refused to undrain d for uid 65534: root only\.' "$T/agent-a.log"
fi

# Bad input: refused, nothing changed.
out=$(fs a drain d --reason "$(printf 'line\nbreak')" 2>&1); rc=$?
is "$rc" 64 "a reason on two lines is refused (64)"
out=$(fs a drain d --reason "$(head -c 201 /dev/zero | tr '\0' x)" 2>&1); rc=$?
is "$rc" 64 "a reason over 200 bytes is refused (64)"
like "$(raw a 'DRAIN name=d on=1 reason=%01')" '^ERROR code=invalid message=invalid%20reason' "the agent refuses a control character in a raw request"
like "$(raw a 'DRAIN name=d on=0 reason=x')" '^ERROR code=invalid message=reason=%20goes%20with%20on=1' "... and a reason with on=0"
like "$(raw a 'DRAIN name=d on=2')" '^ERROR code=invalid message=invalid%20on' "... and on=2"
is "$(rcli HGET 'fleetsem:{d}:clock' '!' | cut -d' ' -f5-)" again "the drain is as it was"

# Undrain: the waiters are granted at once, in the order they came.
out=$(fs b undrain d); rc=$?
is "$rc" 0 "root on b undrains d"
is "$out" "d is granted again; 1 waiter(s) granted at once." "... one waiter fits beside the holder"
check "w1 gets in" wait_for 5 grep -qx 'enter w1' "$T/order"
is "$(sed -n 2p "$T/order")" "enter w1" "the first in line first"
check "the journal of b says who undrained d" grep -q \
        'Undrained d for root (uid 0, pid [0-9]*) on b (drained by root (uid 0) on a since .*: again); 1 waiter(s) granted at once\. \[name=d action=undrain' \
        "$T/agent-b.log"
touch "$T/go-h1"
check "w2 gets in when h1 leaves" wait_for 5 grep -qx 'enter w2' "$T/order"
is "$(fs a undrain d)" "d was not drained." "undraining it again changes nothing"
is "$(fs a status d | sed -n 's/at [0-9-]* [0-9:]* UTC/at WHEN/; s/^  Last action: //p')" 'undrain by root (uid 0) on b at WHEN' \
        "status: the last action on d is b's undrain (no reason given; the undrain that changed nothing is none)"
like "$(fs a metrics)" 'fleetsem_drained\{name="d"\} 0' "the metrics: fleetsem_drained{name=\"d\"} 0"
touch "$T/go-w1" "$T/go-w2"
for p in "$h1" "$w1" "$w2"; do wait "$p"; done
is "$(holders d) $(waiters d)" "0 0" "all released"
is "$(fs a status | grep -c 'Last action: undrain by root (uid 0) on b')" 1 \
        "status of all names lists d, nobody holding or waiting, for its last action"
done_testing
