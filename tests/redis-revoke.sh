#!/bin/bash
# Revoke, on two agents ("hosts") and Redis: root on a takes back the slot
# a job on b holds; b's agent hears it at once (not at its next renewal)
# and b's job acts on the lost slot (SIGTERM); a's waiter is granted with a
# higher token once b's job ended, never beside it; with b's agent frozen,
# only once b's lease ran out, after its job, fenced, was gone; --now
# frees it at once; the
# journal and status say who did it and why; a job that traps SIGTERM and
# runs on is killed before its slot may go to its successor; a lease that waits, or holds
# nothing, is not revoked; --host revokes every slot of one host (of the
# names given); nobody else may revoke; bad input changes nothing.
# (A lease of 6 s: renewals every 2 s, so that hearing it within 1 s of a
# revoke made just after a renewal is the wake message's doing.)
TTL=6s
. "$(dirname "$0")/lib.sh"

start_redis
start_agent a
start_agent b

# hold HOST NAME TAG [FIFO]: a job that notes "enter TAG TOKEN MS" in
# $T/order when it gets its slot, runs until $T/go-TAG exists, and notes
# "term TAG MS" when it is told to stop (MS: its own clock, ms since the
# epoch). With FIFO (an end_fifo), it first notes "probe TAG gone" if no
# process held FIFO open for writing as it started, "probe TAG alive" if
# one did: a state seen at that moment, where the times of two processes
# would each come late by however long a busy machine kept them waiting.
hold() {
        local host=$1 name=$2 tag=$3 probe=:
        [ -z "${4:-}" ] || probe="if dd if='$4' iflag=nonblock of=/dev/null 2>/dev/null; then \
                echo probe $tag gone; else echo probe $tag alive; fi >>'$T/order'"
        fs "$host" run --slots 1 "$name" -- sh -c "$probe; trap 'echo term $tag \$(date +%s%3N) >>$T/order; exit 143' TERM; \
                echo enter $tag \$FLEETSEM_TOKEN \$(date +%s%3N) >>'$T/order'; \
                while [ ! -e '$T/go-$tag' ]; do sleep 0.05; done" 2>>"$T/run-$tag.err"
}
probed() { awk -v t="$1" '$1 == "probe" && $2 == t { print $3 }' "$T/order"; }
entered() { grep -q "^enter $1 " "$T/order"; }
token_of() { awk -v t="$1" '$1 == "enter" && $2 == t { print $3 }' "$T/order"; }
entered_at() { awk -v t="$1" '$1 == "enter" && $2 == t { print $4 }' "$T/order"; }
ended_at() { awk -v t="$1" '$1 == "term" && $2 == t { print $3 }' "$T/order"; }
holder_of() { rcli ZRANGE "fleetsem:{$1}:holders" 0 -1; }
now_ms() { date +%s%3N; }
# just_renewed NAME LEASE: waits for the holder's agent to renew it (its
# expiry in Redis moves), so that its next renewal is a third of a lease
# away; prints the new expiry (ms, Redis' clock).
just_renewed() {
        local before after
        before=$(rcli ZSCORE "fleetsem:{$1}:holders" "$2")
        wait_for 10 sh -c "[ \"\$(redis-cli -s '$REDIS_SOCK' ZSCORE 'fleetsem:{$1}:holders' '$2')\" != '$before' ]" ||
                return 1
        rcli ZSCORE "fleetsem:{$1}:holders" "$2"
}
# sample NAME: every 10 ms until killed, the name's holders as Redis counts
# them (ZCARD and the state's HELD) into $T/held-NAME.
sample() {
        while :; do
                echo "$(redis-cli -s "$REDIS_SOCK" ZCARD "fleetsem:{$1}:holders")" \
                        "$(redis-cli -s "$REDIS_SOCK" HGET "fleetsem:{$1}:clock" . | cut -d' ' -f1)"
                sleep 0.01      # not synchronisation: the sampler's period
        done >>"$T/held-$1"
}
# sampled NAME: the sampler wrote NAME's holders once more since the call
# (within 10 s): its samples cover that moment, however few a busy machine
# let it take. Until the sampler has opened its file (a busy machine may
# run this first), it holds 0 samples.
samples() { if [ -e "$T/held-$1" ]; then wc -l <"$T/held-$1"; else echo 0; fi; }
more_samples() { [ "$(samples "$1")" -gt "$2" ]; }
sampled() { local n; n=$(samples "$1"); wait_for 10 more_samples "$1" "$n"; }
most_held() { tr ' ' '\n' <"$T/held-$1" | sort -n | tail -n 1; }

hold b r hb & hb=$!
check "b's job holds r" wait_for 10 entered hb
hold a r wa & wa=$!
check "a's job waits for r" wait_for 10 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{r}:queue') = 1 ]"
lease=$(holder_of r)
like "$lease" '^[0-9a-f]{32}$' "Redis: b's lease holds r"
waiting=$(rcli ZRANGE 'fleetsem:{r}:queue' 0 -1)

# Nobody else may revoke: the agent checks.
if prereq "root, setpriv and the user nobody" sh -c '[ "$(id -u)" = 0 ] && command -v setpriv && id nobody'; then
        out=$(setpriv --reuid=nobody --regid=nogroup --clear-groups /usr/bin/python3 "$(dirname "$0")/agent-raw.py" "$NSBASE-a" \
                "REVOKE name=r lease=$lease" 2>&1)
        like "$out" '^ERROR code=permission message=only%20root%20may%20revoke%20a%20slot' "the agent refuses nobody's REVOKE"
        out=$(setpriv --reuid=nobody --regid=nogroup --clear-groups env FLEETSEM_NAMESPACE="$NSBASE-a" "$FLEETSEM" \
                revoke "$lease" 2>&1); rc=$?
        is "$rc" 77 "fleetsem revoke as nobody: 77"
        is "$(holder_of r)" "$lease" "... and b's job still holds r"
        check "the journal says who was refused" grep -q 'Refused to revoke a slot of r for uid 65534: root only\.' \
                "$T/agent-a.log"
fi

# Bad input: refused, nothing changed.
fs a revoke not-a-lease >/dev/null 2>&1
is "$?" 64 "a malformed lease id: 64"
fs a revoke --reason "$(printf 'two\nlines')" "$lease" >/dev/null 2>&1
is "$?" 64 "a reason on two lines: 64"
like "$(raw a "REVOKE lease=$lease")" '^ERROR code=invalid message=REVOKE%20needs%20name=%20and%20lease=' \
        "a raw REVOKE without name= is refused"
like "$(raw a "REVOKE name=r lease=$lease reason=%01")" '^ERROR code=invalid message=invalid%20reason' \
        "... and one with a control character in its reason"
out=$(fs a revoke "$waiting" 2>&1); rc=$?
is "$rc" 65 "a lease that waits is not revoked: 65"
like "$out" 'holds no slot \(it waits; only held slots are revoked\)' "... and says so"
is "$(holder_of r) $(rcli ZRANGE 'fleetsem:{r}:queue' 0 -1)" "$lease $waiting" "nothing changed"

# Root on a revokes b's slot, just after b's agent renewed it. The sampler
# counts as often as the machine lets it; what it must cover is the whole
# window: a sample before the revoke and one after a's waiter got in.
sample r & sampler=$!
check "the sampler counts r's holders before the revoke" sampled r
just_renewed r "$lease" >/dev/null || not_ok "b's agent renews its lease"
t_revoke=$(now_ms)
out=$(fs a revoke --reason "host b is being replaced" "$lease"); rc=$?
is "$rc" 0 "root on a revokes b's lease"
like "$out" "^Revoked $lease of r \\(held on b, uid 0, token [0-9]+\\); 0 waiter\\(s\\) granted at once\\.\$" "... and is told so"
like "$out" "^Its slot is free once the job stopped, in [0-9]+ ms at the latest \\(--now: at once\\)\\.\$" \
        "... and when it is free at the latest"
check "b's job is told to stop (on-lost=term)" wait_for 5 grep -q '^term hb' "$T/order"
# headroom: 1 s, 7 times the 140 ms measured under tests/run.sh --busy.
check "... within 1 s of the revoke, not at its agent's next renewal 2 s on ($(( $(ended_at hb) - t_revoke )) ms)" \
        [ "$(( $(ended_at hb) - t_revoke ))" -lt 1000 ]
wait "$hb"
is "$?" 75 "and fleetsem run exits 75 (slot lost)"
check "a's waiter gets in then" wait_for 5 entered wa
check "... after b's job ended ($(( $(entered_at wa) - $(ended_at hb) )) ms after)" \
        [ "$(entered_at wa)" -ge "$(ended_at hb)" ]
check "with a higher token ($(token_of wa) > $(token_of hb))" [ "$(token_of wa)" -gt "$(token_of hb)" ]
check "... and after a's waiter got in" sampled r
kill "$sampler"; wait "$sampler" 2>/dev/null
check "Redis never counted two holders of r ($(samples r) samples)" [ "$(most_held r)" = 1 ]
check "b's agent says the slot was lost, and why" grep -q \
        "LOST slot of r (token $(token_of hb)): its lease is gone from Redis (it ran out, was evicted, or was revoked)\\." \
        "$T/agent-b.log"
check "the journal of a says who revoked what, and why" grep -q \
        "Revoked the slot of r held by lease $lease on b (uid 0, token $(token_of hb)) for root (uid 0, pid [0-9]*) on a (host b is being replaced); it is free once its holder stopped, in [0-9]* ms at the latest\\..*\\[name=r action=revoke lease=$lease token=$(token_of hb) operator=root (uid 0, pid [0-9]*) on a reason=host b is being replaced\\]" \
        "$T/agent-a.log"
is "$(fs b status r | sed -n 's/at [0-9-]* [0-9:]* UTC/at WHEN/; s/^  Last action: //p')" \
        'revoke by root (uid 0) on a at WHEN: host b is being replaced' "status on b: the last action on r"
out=$(fs a revoke "$lease" 2>&1); rc=$?
is "$rc" 65 "revoking it again: 65"
like "$out" "$lease holds no slot" "... it holds nothing"
touch "$T/go-wa"
wait "$wa"
is "$?" 0 "a's job ends well"

# A job that traps TERM and runs on: run sends SIGKILL to its process
# group before its slot may be granted elsewhere (the agent's LOST says
# when: b's last renewal + the lease), not 10 s after the SIGTERM;
# its successor starts after the whole group is gone (seen from outside:
# end_fifo).
end_fifo "$T/fifo-lt" "$T/gone-lt"
fs b run --slots 1 rl -- sh -c "exec 7>'$T/fifo-lt'; trap 'echo term lt \$(date +%s%3N) >>$T/order' TERM; \
        echo enter lt \$FLEETSEM_TOKEN \$(date +%s%3N) >>'$T/order'; \
        while :; do sleep 0.05; done" 2>>"$T/run-lt.err" & lt=$!
check "b's job that runs on after SIGTERM holds rl" wait_for 10 entered lt
hold a rl wl "$T/fifo-lt" & wl=$!
check "a's job waits for rl" wait_for 10 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{rl}:queue') = 1 ]"
lease=$(holder_of rl)
sample rl & sampler=$!
check "the sampler counts rl's holders before the revoke" sampled rl
just_renewed rl "$lease" >/dev/null || not_ok "b's agent renews its lease"
fs a revoke "$lease" >/dev/null || not_ok "root on a revokes b's lease of rl"
check "b's job is told to stop (SIGTERM), and runs on" wait_for 5 grep -q '^term lt' "$T/order"
wait "$lt"
is "$?" 75 "its fleetsem run exits 75"
check "a's waiter gets in" wait_for 10 entered wl
is "$(probed wl)" gone "... after b's whole job was gone (no process of it held its FIFO as a's job started)"
check "b's whole job ended" wait_for 10 test -s "$T/gone-lt"
int_of gone "$(cat "$T/gone-lt")"
int_of term "$(awk '$1 == "term" && $2 == "lt" { print $3; exit }' "$T/order")"
check "b's job was killed, $((gone - term)) ms after its SIGTERM (the lease is 6000 ms)" [ "$gone" -gt "$term" ]
like "$(cat "$T/run-lt.err")" 'COMMAND still running [0-9.ms ]+ after SIGTERM; sending SIGKILL \(before its slot may be granted elsewhere\)' \
        "run says why it sent SIGKILL"
check "... and after a's waiter got in" sampled rl
kill "$sampler"; wait "$sampler" 2>/dev/null
check "Redis never counted two holders of rl ($(samples rl) samples)" [ "$(most_held rl)" = 1 ]
touch "$T/go-wl"
wait "$wl"

# --host: every lease of one host (read from the host's own index, not
# from status), or of the names given; its waiters too, so that a host
# known dead is not handed the slots its holders had.
hold b r2 h2 & h2=$!
hold b r3 h3 & h3=$!
check "b's jobs hold r2 and r3" wait_for 10 sh -c "grep -q '^enter h2 ' $T/order && grep -q '^enter h3 ' $T/order"
hold b r3 h3w & h3w=$!
check "another job of b waits for r3" wait_for 10 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{r3}:queue') = 1 ]"
hold a r3 a3 & a3=$!
check "a job of a waits behind it" wait_for 10 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{r3}:queue') = 2 ]"
out=$(fs a revoke --host b r2 r2); rc=$?
is "$rc" 0 "revoke --host b r2 (r2 given twice)"
like "$out" "^Revoked 1 held slot\\(s\\) and 0 waiting lease\\(s\\) of b on r2; 0 waiter\\(s\\) granted at once\\.\$" \
        "... revokes b's slot of r2 alone, once"
like "$out" "^The slots held are free once their jobs stopped, in [0-9]+ ms at the latest \\(--now: at once\\)\\.\$" \
        "... free once its job stopped"
check "b's job of r2 is told at once" wait_for 5 grep -q '^term h2' "$T/order"
wait "$h2"
check "Redis: r2 free then, r3 still held" \
        wait_for 5 sh -c "[ \"\$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{r2}:holders') \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{r3}:holders')\" = '0 1' ]"
# b stops answering (its agent frozen, as a dead host's): revoke all of it,
# --now.
bpid=$(agent_pid b)
kill -STOP "$bpid"
out=$(fs a revoke --now --host b --reason "b is gone"); rc=$?
is "$rc" 0 "revoke --now --host b: the rest"
is "$out" "Revoked 1 held slot(s) and 1 waiting lease(s) of b; 1 waiter(s) granted at once." \
        "... b's holder of r3 and its waiter, and a's waiter granted"
check "a's job gets r3, not b's waiter" wait_for 5 entered a3
is "$(rcli ZCARD 'fleetsem:{r3}:queue')" 0 "nobody waits for r3 any more"
check "the journal of a says which leases of b it revoked" grep -q \
        "Revoked every lease of host b for root (uid 0, pid [0-9]*) on a (b is gone): 1 held slot(s), 1 waiting; 1 waiter(s) granted at once\\." \
        "$T/agent-a.log"
is "$(fs a revoke --host b)" "Revoked 0 held slot(s) and 0 waiting lease(s) of b; 0 waiter(s) granted at once." \
        "revoke --host b again: nothing left"
check "b's holder, hearing nothing from its agent, fences itself" wait_for 10 grep -q '^term h3' "$T/order"
wait "$h3"
# b comes back: its waiter still wants r3, and its agent queues it again.
kill -CONT "$bpid"
check "b's agent queues its waiter again" wait_for 10 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{r3}:queue') = 1 ]"
touch "$T/go-h3w"
touch "$T/go-a3"
wait "$a3"
check "b's waiter gets r3 then" wait_for 10 entered h3w
wait "$h3w"
# --now (a host known dead): the waiter is granted at once, beside the job
# if it still runs, which its agent tells at once all the same.
hold b rn hn & hn=$!
check "b's job holds rn" wait_for 10 entered hn
hold a rn an & an=$!
check "a's job waits for rn" wait_for 10 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{rn}:queue') = 1 ]"
lease=$(holder_of rn)
out=$(fs a revoke --now "$lease"); rc=$?
is "$rc" 0 "revoke --now"
like "$out" "^Revoked $lease of rn \\(held on b, uid 0, token [0-9]+\\); 1 waiter\\(s\\) granted at once\\.\$" \
        "... grants a's waiter at once"
check "Redis: a's lease holds rn as soon as the revoke returns" [ "$(holder_of rn)" != "$lease" -a -n "$(holder_of rn)" ]
check "a's job gets in" wait_for 5 entered an
check "b's job is told to stop" wait_for 5 grep -q '^term hn' "$T/order"
wait "$hn"
touch "$T/go-an"
wait "$an"
# b's agent frozen: its job is revoked, but its slot is free only once its
# lease runs out (its expiry in Redis, as when it was revoked). The job
# fences itself at 2/3 of the lease, traps its SIGTERM and runs on, and
# run kills it before the lease's end: its successor starts after the
# whole group is gone (end_fifo).
end_fifo "$T/fifo-hf" "$T/gone-hf"
fs b run --slots 1 rf -- sh -c "exec 7>'$T/fifo-hf'; trap 'echo term hf \$(date +%s%3N) >>$T/order' TERM; \
        echo enter hf \$FLEETSEM_TOKEN \$(date +%s%3N) >>'$T/order'; \
        while :; do sleep 0.05; done" 2>>"$T/run-hf.err" & hf=$!
check "b's job holds rf" wait_for 10 entered hf
hold a rf af "$T/fifo-hf" & af=$!
check "a's job waits for rf" wait_for 10 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{rf}:queue') = 1 ]"
lease=$(holder_of rf)
sample rf & sampler=$!
check "the sampler counts rf's holders before the revoke" sampled rf
expiry=$(just_renewed rf "$lease") || not_ok "b's agent renews its lease"
kill -STOP "$bpid"
t_revoke=$(now_ms)
out=$(fs a revoke "$lease"); rc=$?
is "$rc" 0 "revoke while b's agent is frozen"
check "a's job gets in only once b's lease ran out" wait_for 15 entered af
check "... at its lease's end or later: $(( $(entered_at af) - t_revoke )) ms after the revoke, $(( expiry - t_revoke )) ms at least" \
        [ "$(entered_at af)" -ge "$expiry" ]
check "b's job fenced itself (on-lost=term)" wait_for 5 grep -q '^term hf' "$T/order"
is "$(probed af)" gone "... and was gone as a's job got in (no process of it held its FIFO)"
check "... its whole job ended" wait_for 10 test -s "$T/gone-hf"
int_of gone "$(cat "$T/gone-hf")"
int_of term "$(awk '$1 == "term" && $2 == "hf" { print $3; exit }' "$T/order")"
check "... having run on past its SIGTERM ($((gone - term)) ms)" [ "$gone" -gt "$term" ]
kill -CONT "$bpid"
wait "$hf"
is "$?" 75 "... and its fleetsem run exits 75"
check "... and after a's job got in" sampled rf
kill "$sampler"; wait "$sampler" 2>/dev/null
check "Redis never counted two holders of rf ($(samples rf) samples)" [ "$(most_held rf)" = 1 ]
touch "$T/go-af"
wait "$af"
# A LEASE on a name outside the 1000 status lists (those that stay in
# Redis longest: the index holds when each name's keys leave): found with
# --name.
hold b old ho & ho=$!
check "b's job holds old" wait_for 10 grep -q '^enter ho ' "$T/order"
lease=$(holder_of old)
now=$(rcli TIME | head -n 1)
for i in $(seq 1 1001); do echo "ZADD fleetsem:names $(( (now + 3 * 86400) * 1000 )) fake$i"; done | rcli >/dev/null
out=$(fs a revoke "$lease" 2>&1); rc=$?
is "$rc" 65 "past the 1000 names status lists, a LEASE alone is not found: 65"
like "$out" 'give its name with --name' "... and the message says what to do"
out=$(fs a revoke --name old "$lease"); rc=$?
is "$rc" 0 "revoke --name old LEASE finds it"
check "b's job stops" wait_for 5 grep -q '^term ho' "$T/order"
wait "$ho"
done_testing
