#!/bin/bash
# The agent's Lua scripts on their own, against a real redis-server, as the
# agent loads them (lua-lib.sh): first come first served, the limit in
# force, owners, tokens that never go back, grace, a slot a host holds
# itself, idle names leaving Redis, wake messages, Redis' work a grant,
# group commit, the name's state, drain, revoke and the status reply.
# Redis' clock, its steps, the epoch and the global keys lost are in
# lua-clocks.sh.
. "$(dirname "$0")/lua-lib.sh"

# ---- First come, first served ------------------------------------------------
# Leases of a minute, here and in "One limit per name": no lease there may
# run out between its call and the last check (each check a python,
# seconds apiece on a busy machine; with 10 s, w3's ran out before the
# status that looks for it, and the limit's holders before its counts).
TTL_MS=60000
r=$(acquire fifo h 1)
is "$(j "$r" 'r[0::3]')" "[1,1]" "fifo: a free slot is granted at once (held 1)"
is "$(j "$r" 'r[4]')" 1 "fifo: the limit in force is the holder's slots"
for i in 1 2 3; do
        r=$(acquire fifo "w$i" 1)
        is "$(j "$r" 'r[:4]')" "[0,$i,1,1]" "fifo: w$i queues at position $i behind 1 holder, limit 1"
        is "$(j "$r" '0 < r[4] <= 60000')" true "fifo: w$i hears when the holder expires (${r})"
done
is "$(j "$(acquire fifo w2 1)" 'r[:4]')" "[0,2,1,1]" "fifo: asking again keeps the place in line"
r=$(release fifo h)
is "$(j "$r" '[r[0], r[1], len(r)]')" '[1,"w1",4]' "fifo: release hands the slot to the first in line"
is "$(release fifo w2)" "[0]" "fifo: a waiter that leaves the line held nothing"
r=$(release fifo w1)
is "$(j "$r" '[r[0], r[1], len(r)]')" '[1,"w3",4]' "fifo: the next release skips the one that left"
is "$(j "$(status fifo)" '[h[0] for h in r[1]] + [w[0] for w in r[2]]')" '["w3"]' "fifo: w3 holds, nobody waits"
# The counts a call reads instead of counting: after each kind of change
# they are what the ZSETs and the records say ("HELD LINE / holders queue records").
is "$(counted fifo)" "1 0 / 1 0 1" "fifo: the name's counts are its ZSETs' after grants, hand-overs, leavers"

# ---- One limit per name --------------------------------------------------------
# (Leases of a minute, as above: each holder here must outlast the checks
# until its release.)
TTL_MS=60000
acquire lim h 1 >/dev/null
r=$(acquire lim w1 3)
is "$(j "$r" 'r[:4]')" "[0,1,1,1]" "limit: slots=3 behind a holder with slots=1 queues, limit 1"
is "$(j "$(acquire lim w2 3)" 'r[:4]')" "[0,2,1,1]" "limit: a second slots=3 queues behind it"
is "$(j "$(status lim)" 'r[3]')" 1 "limit: status says limit 1"
r=$(release lim h)
is "$(j "$r" '[r[0]] + r[1::3]')" '[1,"w1","w2"]' "limit: the slots=1 holder gone, both slots=3 are granted"
is "$(j "$(status lim)" '[len(r[1]), r[3]]')" "[2,3]" "limit: 2 hold, limit 3"
is "$(j "$(acquire lim x 1)" 'r[:4]')" "[0,1,2,1]" "limit: slots=1 with 2 holders queues (limit 1)"
is "$(j "$(acquire lim y 5)" 'r[:4]')" "[0,2,2,1]" "limit: slots=5 behind it sees limit 1 too"
is "$(release lim w1)" "[1]" "limit: one of 2 holders leaves: still 1 ≥ limit 1, nobody granted"
r=$(release lim w2)
is "$(j "$r" '[r[0]] + r[1::3]')" '[1,"x"]' "limit: the last leaves: x is granted, y (behind the limit 1) is not"
is "$(counted lim)" "1 1 / 1 1 2" "limit: counted right (x holds, y waits)"
is "$(state lim 3-4)" "1 1" "limit: the limit in force 1, asked for by one"
unset TTL_MS

# ---- Owners ------------------------------------------------------------------
acquire own L 1 >/dev/null
snap() { held_until own L; rec own L; state own 1-4; }
before=$(snap)
is "$(rec own L 1-2)" "a 1000" "owner: the lease belongs to 'a 1000'"
is "$(AS_HOST=b acquire own L 1)" "[-1]" "owner: acquire from another host: -1"
is "$(AS_UID=1001 acquire own L 1)" "[-1]" "owner: acquire from another uid: -1"
is "$(AS_HOST=b release own L)" "[-1]" "owner: release from another host: -1"
is "$(AS_UID=1001 release own L)" "[-1]" "owner: release from another uid: -1"
is "$(AS_HOST=b TTL_MS=600000 renew own L)" '[0,"L"]' "owner: renew from another host: missing"
is "$(AS_HOST=b reassert own L 1 5 1)" "-1" "owner: reassert from another host: -1"
is "$(AS_UID=1001 reassert own L 1 5 1)" "-1" "owner: reassert from another uid: -1"
is "$(AS_HOST=b adopt own L)" "[-1]" "owner: adopt from another host: -1"
is "$(AS_UID=1001 adopt own L)" "[-1]" "owner: adopt from another uid: -1"
is "$(snap)" "$before" "owner: the owner's lease is untouched (expiry, record, counts, limit)"
is "$(TTL_MS=600000 AS_UID=0 renew own L)" "[0]" "owner: the owner's host renews (any uid)"
is "$(j "$(rcli ZSCORE "$(key own holders)" "$(lid L)")" "r - $(redis_ms) > 500000")" true "owner: ... and the expiry moved"
r=$(adopt own L)
is "$(j "$r" '[r[0], r[3]]')" '[1,"INFO lease=L"]' "owner: the owner adopts it"
is "$(j "$r" '"%d %d" % (r[1], r[2])')" "$(rec own L 4-5)" "owner: adopt tells its token and since"
is "$(adopt own nobody)" "[-1]" "adopt: an unknown lease is gone"
acquire own Q 1 >/dev/null
is "$(adopt own Q)" "[0]" "adopt: a waiter is only queued"
is "$(renew own L Q nobody)" '[0,"nobody"]' "renew: extends holder and waiter, reports the unknown"

# ---- Tokens never go back ------------------------------------------------------
# The tokens' clock: Redis' less the steps (and silences) seen so far in
# this process (the fleet clock key's TOKEN_OFFSET_MS). A slow test makes
# silences: a pause of more than half the shortest lease between two calls
# (a machine loaded by other tests) is a step to the scripts, and the
# offset, which only grows in this file (it steps no clock back), is read
# after the calls; what of it is below 0 is no part of the clock.
token_offset_ms() { rcli GET "$FLEET_CLOCK" | awk '{ o = ($4 == "" ? 0 : $4); print (o > 0 ? o : 0) }'; }
# tokens_clock_before T0_US: the tokens' clock at Redis' time T0_US, or
# below it: by the offset as it stands now, after the calls.
tokens_clock_before() { echo $(( $1 - $(token_offset_ms) * 1000 )); }
t0=$(redis_us)
tokens=()
for i in 1 2 3 4 5; do
        r=$(TTL_MS=60000 acquire tok "t$i" 5)
        tokens+=("$(j "$r" 'r[1]')")
        is "$(rec tok "t$i" 4)" "${tokens[-1]}" "tokens: grant $i: its record has the same digits"
done
t0=$(tokens_clock_before "$t0")
is "$(j "$(list "${tokens[@]}")" "all($t0 < t < $TWO53 for t in r) and r == sorted(set(r))")" true \
        "tokens: 5 grants rise, above the tokens' clock in µs before them ($t0), below 2^53: ${tokens[*]}"
emptied
r=$(acquire tok t6 5)
t6=$(j "$r" 'r[1]')
is "$(j "$t6" "r > ${tokens[4]} and r < $TWO53")" true "tokens: after FLUSHALL the next token $t6 is above all 5"
is "$(rec tok t6 4)" "$t6" "tokens: ... its digits in its record, not rounded"
is "$(state tok 5)" "$t6" "tokens: ... and in the counter"
# Redis back with an older counter (a restored snapshot): still above all.
state_set tok 5 7
t7=$(j "$(acquire tok T7 5)" 'r[1]')
is "$(j "$t7" "r > $t6")" true "tokens: with the counter set back to 7 (old data), the next token $t7 is above all before, $t6 too"

# ---- Grace ---------------------------------------------------------------------
acquire gr h 1 >/dev/null
# Ten seconds of grace: the four calls below must all fall inside it, also
# on a machine loaded by sanitizers or a container.
G=$(( $(redis_ms) + 10000 ))
is "$(j "$(GRACE=$G acquire gr2 w 2)" 'r[:4]')" "[0,1,0,2]" "grace: a free name queues a request while in grace"
is "$(j "$(GRACE=$G acquire gr w 1)" 'r[:4]')" "[0,1,1,1]" "grace: a waiter behind a holder"
is "$(GRACE=$G release gr h)" "[1]" "grace: release frees the slot and hands nothing on"
is "$(rcli ZCARD "$(key gr holders)") $(rcli ZCARD "$(key gr queue)")" "0 1" "grace: nobody holds, w still waits"
granted_after_grace() { r=$(GRACE=$G acquire gr w 1) && [ "$(j "$r" 'r[0]')" = 1 ]; }
if wait_for 25 granted_after_grace; then
        is "$(j "$r" "r[2] >= $G")" true "grace: after it the same call grants (since $(j "$r" 'r[2]') ≥ $G)"
else
        not_ok "grace: after it the same call grants (last reply $r)"
fi
G=$(( $(redis_ms) + 60000 ))
big=$(( $(redis_us) + 1000000000 ))
is "$(j "$(GRACE=$G acquire ra W 2)" 'r[:4]')" "[0,1,0,2]" "grace: a new request on a free name waits"
is "$(reassert ra L 2 "$big" 1234)" 1 "grace: reassert works meanwhile"
is "$(state ra 5)" "$big" "grace: ... and raises the counter to its token"
is "$(rec ra L 4-5)" "$big 1234" "grace: ... and keeps its token and since"
is "$(reassert ra N 2 5 1234)" 1 "reassert: a second holder fits slots=2"
is "$(state ra 5)" "$big" "reassert: a lower token does not lower the counter"
is "$(reassert ra M 2 5 1234)" 0 "reassert: a third is lost (2 hold, limit 2)"
is "$(reassert ra L 2 5 1234)" 1 "reassert: a holder already there stays"
t0=$(redis_us)
reassert ra2 L 1 5 1234 >/dev/null
t0=$(tokens_clock_before "$t0")
is "$(j "$(state ra2 5)" "r > $t0")" true "reassert: a lost counter starts from the tokens' clock ($t0 or later), not from a low token"
is "$(counted ra)" "2 1 / 2 1 3" "reassert: the counts are the ZSETs' (2 hold, W waits, 3 records)"

# ---- A slot a host holds itself, after a reset -----------------------------------
# Its host may be down (rebooting) through the reset and its grace, unable
# to put it back or to fence itself: no slot a host would hold itself is
# granted for the caller's lease (its host_lease) after the grace. Redis
# came back without b's slot (a stale snapshot: the name's state is there,
# b's grant is not); the reset's grace is over, c asks with a 60 s lease.
# What makes it such a slot is the argument hold, never the description
# (text for people, which no script reads).
G=$(( $(redis_ms) - 1000 ))
r=$(GRACE=$G TTL_MS=60000 HOLD=1 AS_HOST=c acquire hh c 1)
is "$(j "$r" 'r[:4]')" "[0,1,0,1]" "host-held after a reset: c waits though nobody holds (the grace ended 1 s ago)"
is "$(j "$r" "58000 <= r[4] <= 59000 and r[5] == r[4]")" true \
        "... and is told to look again once its lease after the grace is over, and why it waits ($(j "$r" 'r[4:6]') ms)"
is "$(j "$(GRACE=$G acquire hh2 j 1)" 'r[0]')" 1 "... a job's acquire on another free name after the grace is granted"
is "$(rec hh c | cut -d' ' -f7-)" "+host INFO lease=c" "... its record says the host holds it (+host), before its description"
is "$(j "$(GRACE=$G TTL_MS=60000 DESC='INFO host=c hold=host reason=kernel' AS_HOST=c acquire hh5 c 1)" 'r[0]')" 1 \
        "... a description that says hold=host, without the argument, is no such slot: granted after the grace"
is "$(j "$(GRACE=$((G - 60000)) TTL_MS=60000 HOLD=1 AS_HOST=c acquire hh c 1)" 'r[0]')" 1 \
        "... granted once its lease after the grace is over"
is "$(j "$(GRACE=0 TTL_MS=60000 HOLD=1 AS_HOST=c acquire hh3 c 1)" 'r[0]')" 1 \
        "... and on a Redis whose reset the caller does not know (grace_until 0)"
# Handed on by a release: a waiting host-held slot is left to its own
# acquire (grant_next cannot tell how long it must wait), which a plain
# wake message sends it to.
sub hh4
acquire hh4 j 1 >/dev/null
TTL_MS=60000 HOLD=1 AS_HOST=c acquire hh4 c 1 >/dev/null
is "$(release hh4 j)" "[1]" "host-held waiter: the release hands nothing on"
is "$(rcli ZCARD "$(key hh4 holders)") $(rcli ZCARD "$(key hh4 queue)")" "0 1" "... nobody holds, c still waits"
check "... and wakes the line ('1')" wait_for 5 heard hh4 1
is "$(j "$(TTL_MS=60000 HOLD=1 AS_HOST=c acquire hh4 c 1)" 'r[0]')" 1 "... c's own acquire then grants it"
# Its lease run out unrenewed: "x LEASE HOST host" on the name's channel
# for the agents' journals, before the '1' that wakes the line; a plain
# holder's expiry says only '1'.
sub hh6
granted() { [ "$(j "$(acquire "$1" "$2" 1)" 'r[0]')" = 1 ]; }
TTL_MS=300 acquire hh6 p 1 >/dev/null
acquire hh6 n 1 >/dev/null
# headroom: each poll a call and a python, and p's lease ends only in a
# call after the gap a slow poll makes has been taken for a step once:
# 4.5 s under load (three CPU hogs, load 15 on 2 cores); 30 s is 6 times it.
check "expiry: n is granted once plain p's lease ran out" wait_for 30 granted hh6 n
check "... which wakes the line ('1')" wait_for 5 heard hh6 1
check "... and says no 'x p a host' before it" eval '! heard hh6 "x p a host"'
release hh6 n >/dev/null
TTL_MS=300 HOLD=1 AS_HOST=c acquire hh6 c 1 >/dev/null
acquire hh6 m 1 >/dev/null
check "expiry: m is granted once c's lease, held by its host, ran out" wait_for 30 granted hh6 m
check "... told as 'x c c host'" wait_for 5 heard hh6 "x c c host"

# ---- Idle names leave Redis ----------------------------------------------------
# The PTTL of each key of NAME (default idle) that exists, as a JSON list.
pttls() {
        local k t ttls=()
        for k in $(keys_of "${1:-idle}"); do t=$(rcli PTTL "$k"); [ "$t" = -2 ] || ttls+=("$t"); done
        list "${ttls[@]}"
}
IDLE=5000 acquire idle L 1 >/dev/null
p=$(pttls)
is "$(j "$p" 'len(r) == 2 and all(0 < t <= 5000 for t in r)')" true "idle: the keys that exist (holders, the hash) live 5000 ms: $p"
IDLE=60000 renew idle L >/dev/null
p=$(pttls)
is "$(j "$p" 'len(r) == 2 and all(5000 < t <= 60000 for t in r)')" true "idle: a renewal that asks for longer refreshes them: $p"
IDLE=60000 renew idle L >/dev/null
is "$(j "$(pttls)" "r == $p")" false "idle: (time passes: the PTTLs change)"
p2=$(pttls)
IDLE=60000 renew idle L >/dev/null
is "$(j "$(pttls)" "all(t <= q for t, q in zip(r, $p2))")" true "idle: one just after, with the same idle time, writes no expiry"
# One that asks for less while the name is held cuts nothing short:
# callers' idle times differ (a user's names minutes, root's a day, a
# host's own slot twice host_lease), and the longer may be what keeps
# another lease's keys.
p2=$(pttls)
IDLE=5000 renew idle L >/dev/null
is "$(j "$(pttls)" "len(r) == 2 and all(5000 < t <= q for t, q in zip(r, $p2))")" true \
        "idle: one that asks for less while L holds writes no earlier expiry"
# The release writes nothing that needs time to live: the name leaves when
# its last renewal said.
is "$(IDLE=5000 release idle L)" "[1]" "idle: released"
left=$(for k in $(keys_of idle); do [ "$(rcli EXISTS "$k")" = 1 ] && echo "${k##*:}"; done | paste -sd, -)
is "$left" "clock" "idle: only the name's hash is left (its state: the counters)"
p=$(pttls)
is "$(j "$p" 'len(r) == 1 and all(5000 < t <= 60000 for t in r)')" true "idle: it lives what its last longer renewal gave it: $p"
# A name its callers all give 5000 ms (long enough that a loaded machine's
# pause between two calls does not outlast it) leaves 5000 ms after its
# last use.
IDLE=5000 acquire idle2 L 1 >/dev/null
IDLE=5000 renew idle2 L >/dev/null
is "$(IDLE=5000 release idle2 L)" "[1]" "idle: another name, released"
p=$(pttls idle2)
is "$(j "$p" 'len(r) == 1 and all(0 < t <= 5000 for t in r)')" true "idle: ... it lives 5000 ms from the last renewal: $p"
gone() { [ "$(rcli EXISTS $(keys_of idle2))" = 0 ]; }
check "idle: all keys of the released name are gone after 5000 ms" wait_for 15 gone
IDLE=0 acquire idle0 L 1 >/dev/null
status idle0 >/dev/null
is "$(rcli PTTL "$(key idle0 holders)")" -1 "idle: idle_ms 0 sets no expiry (and deletes nothing); status sets none"

# ---- Wake messages on release -------------------------------------------------
P1=00112233445566778899aabbccddeeff
P2=ffeeddccbbaa99887766554433221100
sub pub
acquire pub h 1 "$P2" >/dev/null
is "$(rec pub h 6)" - "proof: a lease granted at once keeps none"
acquire pub w 1 "$P1" >/dev/null
is "$(rec pub w 6)" "$P1" "proof: a waiter's is kept while it waits"
acquire pub w3 1 >/dev/null
r=$(status pub)
check "proof: status lists the waiters, but no proof" eval '[[ $r == *\"w3\"* && $r != *$P1* ]]'
r=$(release pub h)
msg=$(j "$r" '"g %s %d %d '"$P1"'" % (r[1], r[2], r[3])')
check "release publishes '$msg': the grant with the waiter's proof" wait_for 5 heard pub "$msg"
is "$(rec pub w 6)" - "proof: gone once used"
r=$(release pub w)
msg2=$(j "$r" '"g %s %d %d -" % (r[1], r[2], r[3])')
check "a waiter that gave no proof: '$msg2'" wait_for 5 heard pub "$msg2"
acquire pub w2 1 "$P2" >/dev/null
is "$(rec pub w2 6)" "$P2" "proof: w2 waits with its proof"
is "$(wakes pub)" "$msg"$'\n'"$msg2" "... and nothing else: no '1' for a hand-over"
is "$(release pub w2)" "[0]" "a waiter leaves the line"
check "that publishes '1' (look again)" wait_for 5 heard pub 1
is "$(rcli HEXISTS "$(key pub clock)" "$(lid w2)")" 0 "proof: gone with the waiter that left"

# ---- Redis' work a grant -------------------------------------------------------
# What the fleet shares: an uncontended acquire and its release, on a name
# Redis already holds, run 13 commands in Redis, both calls counted
# (bench/README.md; the scripts were once 38; 12 before a grant looked
# for its name in the census, one ZMSCORE: forgot.lua, census_keep()).
# Counted by Redis itself (INFO commandstats, every command but the
# test's own: redis-cli --json says HELLO first; INFO; CONFIG; and what no
# script can send, which the test's subscribers may, whenever a loaded
# machine lets them: SUBSCRIBE again after a restart, PING).
commands_run() {
        rcli INFO commandstats | tr -d '\r' |
                awk -F'[:=,]' '/^cmdstat_/ && $1 !~ /^cmdstat_(hello|info|config|subscribe|ssubscribe|psubscribe|ping)([|].*)?$/ { n += $3 } END { print n + 0 }'
}
# (A long lease: on a slow machine the fleet clock's write, due after a
# twentieth of a lease, would be one more. And the shortest lease the
# fleet clock knows (SHORT_MS, its 6th word) forgotten, so that the warm-up
# makes it this one: a gap of half the earlier checks' short lease would
# be taken for a clock step, and written.)
export TTL_MS=600000
rcli SET "$FLEET_CLOCK" "$(rcli GET "$FLEET_CLOCK" | awk '{ $6 = 0; print }')" >/dev/null
acquire work w0 1 >/dev/null
is "$(rcli GET "$FLEET_CLOCK" | awk '{ print $6 }')" "$TTL_MS" "work: the fleet clock's shortest lease is this one's"
release work w0 >/dev/null
# A grant also writes the fleet clock once TOKEN_GRAIN_MS (50 ms) after
# its last write (the tokens' clock: clocks.lua), which a slow moment
# between the warm-up and this grant makes due: one command more then,
# told by the key itself (read outside the count).
clock_before=$(rcli GET "$FLEET_CLOCK")
rcli CONFIG RESETSTAT >/dev/null
r=$(acquire work w1 1)
is "$(j "$r" "r[0]")" 1 "work: granted"
release work w1 >/dev/null
n=$(commands_run)
want=13
[ "$(rcli GET "$FLEET_CLOCK")" = "$clock_before" ] || want=14
is "$n" "$want" "an uncontended acquire and release run 13 commands in Redis, both calls counted (and the tokens' clock write, if due: $want)"
if [ "$n" != "$want" ]; then
        rcli INFO commandstats | tr -d '\r' | grep '^cmdstat_' | sed 's/^/# /'
        rcli INFO commandstats | tr -d '\r' | grep '^cmdstat_' >&2
fi
unset TTL_MS

# ---- Group commit ----------------------------------------------------------------
# Calls as the agent batches them: kind, the place of its name among the
# batch's names (KEYS: each name's keys, then the fleet clock and the
# census), number of args, args; the replies are each call's own, in
# order, as if run one after another.
# batched SCRIPT NAME=VALUE...: one call of a batch on its name number ON
# (default 1).
batched() { args "$@"; BATCH+=("$1" "${ON:-1}" "${#ARGS_OUT[@]}" "${ARGS_OUT[@]}"); }
A() {
        batched acquire lease="$1" slots="$2" ttl_ms=10000 description="job-$1" host=a uid=1000 grace_until_ms=0 \
                idle_ms=600000 weight=1 hold=0 proof="$P1"
}
R() { batched release lease="$1" host=a uid=1000 grace_until_ms=0 idle_ms=600000; }
# lua_names "NAME..." SCRIPT ARGV...: a script on several names' keys.
lua_names() {
        local names=$1 script=$2 k n
        shift 2
        mapfile -t k < <(for n in $names; do keys_of "$n"; done; echo "$FLEET_CLOCK"; echo "$CENSUS")
        rcli --json FCALL "${FN[$script]}" "${#k[@]}" "${k[@]}" "$@" | unlid
}
BATCH=()
A b1 1; A b2 1; A b3 1; R b1
batched renew ttl_ms=10000 host=a grace_until_ms=0 idle_ms=600000 leases=b2
r=$(lua bat batch "${BATCH[@]}")
is "$(j "$r" 'len(r)')" 5 "batch: one reply per call"
is "$(j "$r" '[r[0][0], r[1][:2], r[2][:2]]')" "[1,[0,1],[0,2]]" "batch: b1 gets in, b2 and b3 queue in order"
is "$(j "$r" 'r[3][:2]')" '[1,"b2"]' "batch: b1's release hands the slot to b2 in the same call"
is "$(j "$r" 'r[4]')" "[0]" "batch: b2's renewal finds it held"
is "$(j "$(status bat)" '[h[0] for h in r[1]] + [q[0] for q in r[2]]')" '["b2","b3"]' "batch: Redis has what the calls did"
is "$(counted bat)" "1 1 / 1 1 2" "batch: counted right"
# An agent that restarted adopts its leases in batches too.
BATCH=()
for l in b2 b3 nobody; do batched adopt lease=$l ttl_ms=10000 host=a uid=1000 grace_until_ms=0 idle_ms=0; done
r=$(lua bat batch "${BATCH[@]}")
is "$(j "$r" '[r[0][0], r[1], r[2]]')" "[1,[0],[-1]]" "batch: adopt finds b2 holding, b3 queued, an unknown lease gone"
BATCH=()
A b4 1
r=$(lua bat batch "${BATCH[@]}" acquire 1 3 b5 1 10000 2>&1)
like "$r" "call 2 \(acquire\) of batch takes 10 to 11 arguments, not 3" "batch: a malformed batch is refused ($r)"
is "$(rcli ZSCORE "$(key bat queue)" "$(lid b4)")" "" "batch: ... and none of its calls ran"
# keep: a batch of renewals and releases alone, which Redis runs when it
# is full; a call of another kind makes it malformed, and nothing runs.
BATCH=()
A k1 1
r=$(lua kp batch "${BATCH[@]}")
is "$(j "$r" 'r[0][0]')" 1 "keep: k1 holds"
BATCH=()
batched renew ttl_ms=10000 host=a grace_until_ms=0 idle_ms=600000 leases=k1
R k1
r=$(lua kp keep "${BATCH[@]}")
is "$(j "$r" '[r[0], r[1][0]]')" "[[0],1]" "keep: k1 renewed, then released"
BATCH=()
R k1; A k2 1
r=$(lua kp keep "${BATCH[@]}" 2>&1)
like "$r" "malformed call at argument 9" "keep: an acquire in it is refused ($r)"
is "$(rcli HEXISTS "$(key kp clock)" "$(lid k2)")" 0 "keep: ... and none of its calls ran"
# Which functions Redis runs when it is full (past maxmemory): those that
# grow nothing there.
flags=$(rcli FUNCTION LIST LIBRARYNAME fleetsem | tr -d '\r' | awk '
        $0 == "name" { getline; name = $0 } $0 == "flags" { getline; if (name != "" && $0 == "allow-oom") print name }' |
        sed 's/_v[0-9]*$//' | sort | tr '\n' ' ')
is "$flags" "fleetsem_counts fleetsem_keep fleetsem_release fleetsem_renew fleetsem_status " \
        "allow-oom: renew, release, keep, status and counts alone"
# A batch spans names (one Redis; in a Cluster those of one hash slot):
# each call says which, and its name's calls, in any interleaving, answer
# and write as that many separate calls would, the name's state written
# before the next name's calls.
BATCH=()
ON=1 A x1 1; ON=2 A y1 1; ON=1 A x2 1; ON=2 A y2 1; ON=1 R x1
ON=3 batched adopt lease=z0 ttl_ms=10000 host=a uid=1000 grace_until_ms=0 idle_ms=0
r=$(lua_names "mb1 mb2 mb3" batch "${BATCH[@]}")
is "$(j "$r" '[r[0][0], r[1][0], r[2][:4], r[3][:4], r[4][:2], r[5]]')" '[1,1,[0,1,1,1],[0,1,1,1],[1,"x2"],[-1]]' \
        "batch of names: each call answered on its own name, in order"
is "$(j "$r" 'r[4][2] > r[0][1] and r[4][3] >= r[0][2]')" true "batch of names: ... x2 gets a token after x1's"
is "$(rec mb1 x2 4)" "$(j "$r" 'r[4][2]')" "batch of names: mb1's hash has x2's token"
is "$(counted mb1) | $(counted mb2)" "1 0 / 1 0 1 | 1 1 / 1 1 2" "batch of names: each name counted right"
is "$(rcli ZSCORE "$CENSUS" 'fleetsem:{mb1}') $(rcli ZSCORE "$CENSUS" 'fleetsem:{mb2}')" \
        "$(state mb1 9) $(state mb2 9)" "batch of names: the census knows when each name leaves"
like "$(state mb1 9) $(state mb2 9)" '^[1-9][0-9]* [1-9][0-9]*$' "batch of names: ... a time for each"
is "$(rcli PEXPIRETIME "$(key mb1 clock)") $(rcli PEXPIRETIME "$(key mb2 holders)")" "$(state mb1 9) $(state mb2 9)" \
        "batch of names: ... and so do their keys"
BATCH=()
ON=1 A x3 1; ON=3 A z1 1
r=$(lua_names "mb1 mb2" batch "${BATCH[@]}" 2>&1)
like "$r" "malformed call" "batch of names: a call on a name the batch has not is refused ($r)"
is "$(rcli HEXISTS "$(key mb1 clock)" "$(lid x3)")" 0 "batch of names: ... and none of its calls ran"
BATCH=()
ON=1 A x3 1; ON=0 A x3 1
r=$(lua_names "mb1 mb2" batch "${BATCH[@]}" 2>&1)
like "$r" "malformed call" "batch of names: ... so is one on name 0"
BATCH=()
A x3 1; A x4 1
mapfile -t k < <(keys_of mb1; echo "fleetsem:{mb1}:x"; echo "$FLEET_CLOCK"; echo "$CENSUS")
r=$(rcli --json FCALL "${FN[batch]}" "${#k[@]}" "${k[@]}" "${BATCH[@]}" 2>&1)
like "$r" "batch takes the runs of keys of a name then 2, not 7 keys" "batch of names: keys that are not whole names' are refused ($r)"
is "$(rcli HEXISTS "$(key mb1 clock)" "$(lid x3)")" 0 "batch of names: ... and nothing ran"
# After a reset an agent puts all its holders back in one batch: each
# re-assertion answered as reassert.lua alone would (1 held, 0 lost, -1
# another's), on its own name, and Redis counts them.
BATCH=()
ON=1 batched reassert lease=ra1 slots=1 token=7 since_ms=1234 ttl_ms=10000 description="back ra1" host=a uid=1000 \
        grace_until_ms=0 idle_ms=600000 weight=1 hold=0
ON=1 batched reassert lease=ra2 slots=1 token=8 since_ms=1234 ttl_ms=10000 description="back ra2" host=a uid=1000 \
        grace_until_ms=0 idle_ms=600000 weight=1 hold=0
ON=2 batched reassert lease=rb1 slots=2 token=9 since_ms=1234 ttl_ms=10000 description="back rb1" host=a uid=1000 \
        grace_until_ms=0 idle_ms=600000 weight=1 hold=0
ON=1 batched reassert lease=ra1 slots=1 token=7 since_ms=1234 ttl_ms=10000 description="back ra1" host=b uid=1000 \
        grace_until_ms=0 idle_ms=600000 weight=1 hold=0
r=$(lua_names "rbat1 rbat2" batch "${BATCH[@]}")
is "$r" '[1,0,1,-1]' "batch of reasserts: held, lost (the limit is 1), held on the other name, another host's refused"
is "$(rcli ZRANGE "$(key rbat1 holders)" 0 -1 | unlid) $(rcli ZRANGE "$(key rbat2 holders)" 0 -1 | unlid)" "ra1 rb1" \
        "batch of reasserts: Redis holds what they put back"
is "$(rec rbat1 ra1 4) $(rec rbat2 rb1 4)" "7 9" "batch of reasserts: ... with their tokens"
is "$(counted rbat1) | $(counted rbat2)" "1 0 / 1 0 1 | 1 0 / 1 0 1" "batch of reasserts: each name counted right"

# ---- The name's state --------------------------------------------------------------
# Many leases of one agent on one name: one renewal, read and written a
# few thousand at a time.
BATCH=()
for i in $(seq 1 4500); do batched acquire lease="m$i" slots=5000 ttl_ms=10000 description=- host=a uid=1000 \
        grace_until_ms=0 idle_ms=600000 weight=1 hold=0; done
is "$(lua many batch "${BATCH[@]}" | grep -o '\[1,' | wc -l)" 4500 "many: 4500 grants in one batch"
leases=(); for i in $(seq 1 4500); do leases+=("m$i"); done
is "$(renew many "${leases[@]}" gone1 gone2)" '[0,"gone1","gone2"]' "many: one renewal of 4502 leases extends 4500"
is "$(counted many)" "4500 0 / 4500 0 4500" "many: counted right"
# A holder's entry removed by hand (as eviction would): its renewal says it
# is missing and that Redis forgot the name (for a lease), the counts
# follow the ZSETs again, and nobody gets in until the holder is back.
acquire gone-by-hand h 1 >/dev/null
acquire gone-by-hand h2 2 >/dev/null
rcli ZREM "$(key gone-by-hand holders)" "$(lid h)" >/dev/null
r=$(renew gone-by-hand h h2)
is "$(j "$r" 'r[1:]')" '["h"]' "lost entry: a holder removed by hand is missing at its renewal"
is "$(j "$r" '0 < r[0] <= 10000')" true "lost entry: ... and the name grants nothing for a lease ($(j "$r" 'r[0]') ms)"
is "$(counted gone-by-hand)" "0 1 / 0 1 1" "lost entry: its record went, the counts are the ZSETs'"
r=$(acquire gone-by-hand h2 2)
is "$(j "$r" 'r[0]')" 0 "lost entry: so the waiter behind it still waits"
is "$(j "$r" '0 < r[4] <= 10000')" true "lost entry: ... told to look again when that lease is over"
is "$(reassert gone-by-hand h 1 5 1234)" 1 "lost entry: its agent puts the holder back meanwhile"
is "$(counted gone-by-hand)" "1 1 / 1 1 2" "lost entry: ... counted again"
# ---- Drain -----------------------------------------------------------------------
# A drained name grants nothing new: its holders run on, newcomers and
# waiters queue in line order (and hear why); undrained, the waiters that
# fit are granted at once, in line order, with the release's wake message.
sub dr
acquire dr h 2 >/dev/null
r=$(drain dr 1 "incident 42: disk full")
is "$(j "$r" 'r[:2]')" '[1,""]' "drain: a name not drained before is drained"
like "$(rcli HGET "$(key dr clock)" '!')" '^a 0 [0-9]+ root incident 42: disk full$' "drain: the record says by whom, when and why"
is "$(rcli HGET "$(key dr clock)" '@' | cut -d' ' -f1-3,5-)" 'drain a 0 root incident 42: disk full' \
        "drain: the last action says what, by whom and why"
is "$(rcli PTTL "$(key dr clock)") $(rcli PTTL "$(key dr holders)")" "-1 -1" "drain: its keys no longer expire"
r=$(acquire dr w1 2)
is "$(j "$r" 'r[:3]')" "[0,1,1]" "drain: a newcomer with a free slot queues (1st, 1 holds)"
like "$(j "$r" 'r[6]')" '^a 0 [0-9]+ root incident 42: disk full$' "drain: ... and is told the drain"
is "$(j "$(acquire dr w2 2)" 'r[:2]')" "[0,2]" "drain: a second queues behind it"
is "$(j "$(renew dr h)" 'r')" "[0]" "drain: the holder is renewed"
is "$(j "$(TTL_MS=600000 renew dr w1 w2)" 'r')" "[0]" "drain: the waiters keep their places"
is "$(j "$(release dr h)" 'r')" "[1]" "drain: the holder leaves: nobody is granted"
is "$(j "$(status dr)" '[len(r[1]), len(r[2]), r[4].split()[4:]]')" '[0,2,["incident","42:","disk","full"]]' \
        "drain: status shows no holder, 2 waiters and the drain"
is "$(j "$(drain dr 1 again)" 'r[0]')" 0 "drain: draining a drained name again only replaces its record (who, when, why)"
is "$(rcli HGET "$(key dr clock)" '@' | cut -d' ' -f1,6-)" 'drain again' "drain: ... and is the last action"
r=$(AS_HOST=b drain dr 0)
is "$(j "$r" '[r[0], r[2], r[5]]')" '[1,"w1","w2"]' "undrain: both waiters are granted at once, in line order"
check "undrain: with the release's wake message" wait_for 5 sh -c "grep -q '^g $(lid w1) ' '$T/wake-dr'"
is "$(rcli HEXISTS "$(key dr clock)" '!')" 0 "undrain: the record is gone"
like "$(rcli PTTL "$(key dr clock)")" '^[1-9][0-9]*$' "undrain: the keys expire again when idle"
is "$(rcli HGET "$(key dr clock)" '@' | cut -d' ' -f1-2,5-)" 'undrain b root ' "undrain: the last action, from host b, no reason"
is "$(j "$(drain dr 0)" 'r[:2]')" '[0,""]' "undrain: of a name not drained changes nothing"
is "$(rcli HGET "$(key dr clock)" '@' | cut -d' ' -f1-2)" 'undrain b' "undrain: ... and is no action"
is "$(counted dr)" "2 0 / 2 0 2" "drain: counted right"
drain gr-dr 1 x >/dev/null
is "$(j "$(acquire gr-dr q 1)" 'r[0]')" 0 "drain: q queues"
r=$(GRACE=$(( $(redis_ms) + 60000 )) drain gr-dr 0)
is "$(j "$r" '[r[0], len(r)]')" "[1,2]" "undrain during a reset's grace: nobody is granted yet"

# The fleet limit: callers that ask for no number (slots 0) need it, and
# take it; the limit in force is the lowest of it and what others asked;
# lowered, it ends no holder; raised, it grants the waiters that fit at
# once; removed, those that asked for none are refused. Leases of a
# minute, as in fifo's: the holders here are renewed once, and a busy
# machine took more than 10 s over the checks that follow.
TTL_MS=60000
sub fl
is "$(j "$(acquire fl n0 0)" 'r')" "[-2]" "fleet limit: a caller asking for none, with no fleet limit, is refused"
is "$(counted fl)" "0 0 / 0 0 0" "fleet limit: ... and nothing of it is kept"
r=$(fleet_limit fl 2 "two at most")
is "$(j "$r" 'r')" '[""]' "fleet limit: set to 2 (none before)"
like "$(rcli HGET "$(key fl clock)" '#')" '^2 a 0 [0-9]+ root two at most$' "fleet limit: the record says N, by whom, when and why"
is "$(rcli HGET "$(key fl clock)" '@' | cut -d' ' -f1-3,5-)" 'limit a 0 root set to 2: two at most' \
        "fleet limit: the last action says what, by whom and why"
is "$(rcli PTTL "$(key fl clock)")" -1 "fleet limit: the name's keys no longer expire"
is "$(j "$(acquire fl h1 0)" 'r[0], r[4]')" "[1,2]" "fleet limit: a caller asking for none is granted, limit 2"
is "$(j "$(acquire fl h2 0)" 'r[0]')" 1 "fleet limit: a second is granted"
is "$(j "$(acquire fl w1 0)" 'r[:4]')" "[0,1,2,2]" "fleet limit: a third waits (1st, 2 hold, limit 2)"
is "$(j "$(acquire fl w2 5)" 'r[:4]')" "[0,2,2,2]" "fleet limit: one asking for 5 waits too: the fleet limit is lower"
is "$(j "$(status fl)" 'r[3], r[6].split()[0]')" '[2,"2"]' "fleet limit: status gives the limit in force and the record"
r=$(fleet_limit fl 1)
is "$(j "$r" '[len(r), r[0].split()[0]]')" '[1,"2"]' "fleet limit: lowered to 1, nobody granted (it was 2)"
is "$(j "$(renew fl h1 h2)" 'r')" "[0]" "fleet limit: lowered, both holders are renewed"
is "$(j "$(release fl h1)" 'r')" "[1]" "fleet limit: one holder leaves: with 1 holding of limit 1, nobody is granted"
r=$(fleet_limit fl 4)
is "$(j "$r" '[r[1], r[4]]')" '["w1","w2"]' "fleet limit: raised to 4, both waiters are granted at once, in line order"
check "fleet limit: with the release's wake message" wait_for 5 sh -c "grep -q '^g $(lid w1) ' '$T/wake-fl'"
is "$(j "$(acquire fl w3 0)" '[r[0], r[3], r[4]]')" "[1,4,4]" "fleet limit: a fourth is granted (4 hold, limit 4)"
is "$(j "$(acquire fl w4 0)" 'r[:2]')" "[0,1]" "fleet limit: a fifth waits"
is "$(j "$(acquire fl w5 0)" 'r[:2]')" "[0,2]" "fleet limit: a sixth waits behind it"
r=$(fleet_limit fl 0 "back to the drop-ins")
is "$(j "$r" '[len(r), r[0].split()[0], r[1]]')" '[4,"4","w4"]' \
        "fleet limit: removed (it was 4): the limit in force is what w2 asked (5), and the next waiter is granted"
is "$(rcli HEXISTS "$(key fl clock)" '#')" 0 "fleet limit: the record is gone"
is "$(j "$(acquire fl w5 0)" 'r')" "[-2]" "fleet limit: removed, the waiter that asked for none is refused"
like "$(rcli PTTL "$(key fl clock)")" '^[1-9][0-9]*$' "fleet limit: removed, the keys expire again when idle"
is "$(j "$(reassert fl w6 0 9 1)" 'r')" 0 "fleet limit: a holder that asked for none is re-asserted within the limit in force (5 of 5 hold): lost"
is "$(counted fl)" "5 1 / 5 1 6" "fleet limit: counted right after all that"
# Redis lost the fleet limit with the data: holders that asked for none
# are put back (nothing is granted without a limit).
sub fr
fleet_limit fr 1 >/dev/null
acquire fr x 0 >/dev/null
fleet_limit fr 0 >/dev/null
is "$(j "$(reassert fr y 0 9 1)" 'r')" 1 "fleet limit gone, nobody asked a number: a holder that asked for none is re-asserted"
is "$(j "$(acquire fr z 0)" 'r')" "[-2]" "... and a newcomer asking for none is refused"
unset TTL_MS

# Weights: a lease takes WEIGHT units of the limit; HELD counts units; the
# line stays first come, first served (a heavy head is not overtaken by a
# light one behind it); a weight above the limit in force is refused; the
# record keeps the weight ("*K" before the description), status shows it.
sub wt
is "$(j "$(WEIGHT=2 acquire wt big1 3)" '[r[0], r[3], r[4]]')" "[1,2,3]" "weights: a job of weight 2 is granted (2 units held of 3)"
is "$(rec wt big1 7-)" "*2 INFO lease=big1" "weights: its record keeps the weight before the description"
is "$(state wt 1)" 2 "weights: HELD counts units"
is "$(j "$(WEIGHT=2 acquire wt big2 3)" 'r[:4]')" "[0,1,2,3]" "weights: a second of weight 2 does not fit beside it: it waits, first"
is "$(j "$(acquire wt small 3)" 'r[:2]')" "[0,2]" "weights: a light one behind it waits too, though 1 unit is free: no overtaking"
is "$(j "$(WEIGHT=4 acquire wt huge 3)" 'r')" "[-3,3]" "weights: a weight above the limit in force is refused, with the limit"
is "$(j "$(status wt)" '[[h[0], h[5]] for h in r[1]] + [[q[0], q[3]] for q in r[2]]')" '[["big1",2],["big2",2],["small",1]]' \
        "weights: status gives each one's weight"
r=$(release wt big1)
is "$(j "$r" '[r[0], r[1], r[4]]')" '[1,"big2","small"]' "weights: the heavy one leaves: both waiters fit (2 + 1 of 3) and are granted, in line order"
is "$(state wt 1-2)" "3 0" "weights: 3 units held, nobody in line"
is "$(j "$(renew wt big2 small)" 'r')" "[0]" "weights: both renewed"
is "$(j "$(acquire wt one 3)" 'r[:4]')" "[0,1,3,3]" "weights: a newcomer of weight 1 waits (3 of 3)"
is "$(j "$(release wt small)" 'r[:2]')" '[1,"one"]' "weights: the light one leaves: the newcomer fits"
is "$(j "$(reassert wt lost 3 9 1)" 'r')" 0 "weights: a re-assertion that does not fit is refused (3 of 3 held)"
is "$(j "$(release wt one)" 'r')" "[1]" "weights: one leaves (2 of 3 held)"
is "$(j "$(WEIGHT=2 reassert wt back 3 9 1)" 'r')" 0 "weights: a re-assertion of weight 2 does not fit beside 2 of 3"
is "$(j "$(reassert wt back 3 9 1)" 'r')" 1 "weights: one of weight 1 does"
is "$(counted wt)" "3 0 / 2 0 2" "weights: counted right (HELD is 3 units of 2 holders)"
rcli HDEL "$(key wt clock)" . >/dev/null
is "$(j "$(acquire wt after 3)" 'r[:4]')" "[0,1,3,3]" "weights: a state lost from the hash is counted again with the weights (3 of 3)"

# Waiters already in line when the name is drained look again (and hear why).
sub dw
acquire dw h 1 >/dev/null
acquire dw w 1 >/dev/null
log_lacks "$T/wake-dw" '^message$' '^subscribe$' "drain: no wake message before the drain"
drain dw 1 y >/dev/null
check "drain: those in line are told to look again ('1')" wait_for 5 heard dw 1

# ---- Revoke ----------------------------------------------------------------------
# Root takes a held slot back, whoever holds it: its holder's agent is
# told on the wake channel ("r LEASE") and its renewals fail, but its
# units stay counted until it releases or its lease runs out (its last
# renewal + the lease: a holder cut off from Redis fences itself at 2/3
# of it and is gone by then); nobody is granted before.
sub rf
acquire rf h 1 >/dev/null
acquire rf w 1 "$P1" >/dev/null
th=$(rec rf h 4)
expiry=$(rcli ZSCORE "$(key rf holders)" "$(lid h)")
until_h=$(held_until rf h)
r=$(AS_HOST=b revoke rf h "replaced")
is "$(j "$r" 'r[:3]')" "[5,\"a 1000\",$th]" "revoke: a holder is revoked, nobody granted in its place yet"
is "$(held_until rf h)" "$until_h" "revoke: its expiry stays the end of its lease (not its fence point)"
is "$(j "$r" "$expiry - $(redis_ms) <= r[3] <= 10000")" true \
        "revoke: the reply says when it is free at the latest ($(j "$r" 'r[3]') ms)"
check "revoke: its agent is told on the wake channel ('r h')" wait_for 5 heard rf "r h"
is "$(rec rf h 6)" revoked "revoke: its record says it is revoked"
is "$(counted rf)" "1 1 / 1 1 2" "revoke: it still counts"
is "$(renew rf h w)" '[0,"h"]' "revoke: its renewal finds it missing"
is "$(held_until rf h)" "$until_h" "revoke: ... and does not extend it"
is "$(acquire rf h 1)" '[-1]' "revoke: acquiring it again is refused"
is "$(adopt rf h)" '[-1]' "revoke: so is adopting it"
is "$(reassert rf h 1 "$th" 0)" '-1' "revoke: and re-asserting it"
is "$(j "$(acquire rf w 1)" 'r[0]')" 0 "revoke: w still waits"
r=$(AS_HOST=b revoke rf h)
is "$(j "$r" 'r[:3]')" "[5,\"a 1000\",$th]" "revoke: revoking it again changes nothing"
is "$(held_until rf h)" "$until_h" "revoke: ... nor its expiry"
r=$(release rf h)
is "$(j "$r" 'r[:2]')" '[1,"w"]' "revoke: its agent's release frees it at once, and w is granted"
is "$(counted rf)" "1 0 / 1 0 1" "revoke: counted right"
# Unreleased: free when its lease runs out, by the expiry sweep. Redis' clock
# is moved on a second at a time, each step followed by w's call, rather
# than waited for: a gap in every caller's calls longer than half the
# shortest lease counts as a clock step and ends nobody's lease
# (prelude/clocks.lua, observe), so polls slower than that (a busy
# machine's, with a lease of 600 ms) kept h from ever reaching its
# expiry. A step of 1 s and a call is a gap of 1 s and what the call takes
# (headroom: judged against half the lease, 5 s: 4 s for the call, which
# takes well under 1 s on a busy machine).
acquire rg h 1 >/dev/null
acquire rg w 1 >/dev/null
is "$(j "$(AS_HOST=b revoke rg h)" 'r[0]')" 5 "revoke: h of rg revoked"
lease_end=$(rcli ZSCORE "$(key rg holders)" "$(lid h)")
granted= off=0
while [ -z "$granted" ] && [ "$off" -lt 20000 ]; do
        off=$((off + 1000))
        step_clock "$off"
        [ "$(j "$(acquire rg w 1)" 'r[0]')" = 1 ] && granted=$(redis_ms)
done
check "revoke: w is granted once h's lease ran out, not before (${granted:+$((granted - lease_end)) ms after it}, the clock $off ms on)" \
        [ -n "$granted" -a "${granted:-0}" -ge "$lease_end" ]
is "$(counted rg)" "1 0 / 1 0 1" "revoke: counted right after the sweep"
step_clock 0
# NOW=1 (a host known dead): freed at once.
sub rv
acquire rv h 1 >/dev/null
acquire rv w 1 "$P1" >/dev/null
th=$(rec rv h 4)
is "$(revoke rv w)" '[2,"a 1000"]' "revoke: a lease that waits is not revoked (and says whose it is)"
r=$(NOW=1 AS_HOST=b revoke rv h "host a is dead")
is "$(j "$r" 'r[:4]')" "[1,\"a 1000\",$th,\"w\"]" "revoke now: another host's holder is freed, and w granted in its place"
check "revoke now: its agent is told on the wake channel too" wait_for 5 heard rv "r h"

is "$(j "$r" "r[4] > $th")" true "revoke: w's token $(j "$r" 'r[4]') is above the revoked one's ($th)"
check "revoke: with the release's wake message and w's proof" wait_for 5 sh -c "grep -q '^g $(lid w) .* $P1\$' '$T/wake-rv'"
is "$(rcli HGET "$(key rv clock)" '@' | cut -d' ' -f1-3,5-)" 'revoke b 0 root host a is dead' \
        "revoke: the last action says what, by whom and why"
is "$(renew rv h)" '[0,"h"]' "revoke: the holder's renewal finds its lease missing"
is "$(revoke rv h)" '[0]' "revoke: a lease that holds nothing any more: nothing to do"
is "$(counted rv)" "1 0 / 1 0 1" "revoke: counted right"
acquire rv w2 1 >/dev/null
drain rv 1 maintenance >/dev/null
tw=$(rec rv w 4)
is "$(NOW=1 revoke rv w)" "[1,\"a 1000\",$tw]" "revoke now: while drained, w is revoked and nobody is granted in its place"
is "$(rcli ZCARD "$(key rv queue)")" 1 "revoke: ... and w2 keeps its place"
is "$(WHICH=w revoke rv w2)" '[3,"a 1000"]' "revoke: waiters only (a host's): w2 leaves the line"
drain rv 0 >/dev/null
acquire rv h3 1 >/dev/null
is "$(WHICH=w revoke rv h3)" '[4,"a 1000"]' "revoke: waiters only: a holder is left"
is "$(j "$(NOW=1 WHICH=1 revoke rv h3)" 'r[0]')" 1 "revoke now: both: the holder goes"
is "$(counted rv)" "0 0 / 0 0 0" "revoke: counted right after all that"

# ---- Status --------------------------------------------------------------------
is "$(j "$(status st)" 'r[1:]')" '[[],[],0,"","","",0,0,0]' "status: an unknown name: nobody, limit 0, not drained, no action, no fleet limit, no totals"
is "$(j "$(counts st)" 'r[1:]')" '[0,0,0,"","",""]' "counts: an unknown name: nothing held or waited for, limit 0, no drain, action or fleet limit"
is "$(rcli EXISTS "$(key st clock)")" 0 "counts: a look alone never creates the key"
acquire st h1 2 >/dev/null
AS_HOST=b AS_UID=7 acquire st h2 3 >/dev/null
acquire st w 4 >/dev/null
r=$(status st)
is "$(j "$r" '[[h[0], 0 < h[1] <= 10000, h[3], h[4]] for h in r[1]]')" \
        '[["h1",true,"INFO lease=h1","a 1000"],["h2",true,"INFO lease=h2","b 7"]]' "status: holders, expiry, desc, owner"
is "$(j "$r" 'r[1][0][2]')" "$(rec st h1 4-5)" "status: holder's 'TOKEN SINCE'"
is "$(j "$r" 'r[2:]')" '[[["w","INFO lease=w","a 1000",1]],2,"","","",2,2,1]' "status: the queue (weight 1), the limit in force, no drain, no action, no fleet limit, the totals"
r=$(counts st)
is "$(j "$r" 'r[1:]')" '[2,1,2,"","",""]' "counts: 2 held, 1 waiting, limit 2, as status says"
# headroom: no deadline: the two readings are a call apart (ms), and 60 s
# tells Redis' clock (TIME) from any other the script could give.
is "$(j "$r" "abs(r[0] - $(redis_ms)) < 60000")" true "counts: now_ms is Redis's clock"
# A page: the first 100 holders (by expiry) and waiters (by ticket), the
# totals of all. (Leases of two minutes and more: 215 calls, each a
# process, must not outlast the first.)
for i in $(seq 1 110); do TTL_MS=$((120000 + i)) acquire pg "h$i" 110 >/dev/null; done
for i in $(seq 1 105); do TTL_MS=120000 acquire pg "w$i" 110 >/dev/null; done
r=$(status pg)
is "$(j "$r" '[len(r[1]), r[1][0][0], r[1][-1][0], len(r[2]), r[2][0][0], r[2][-1][0], r[7], r[8], r[9]]')" \
        '[100,"h1","h100",100,"w1","w100",110,110,105]' "status: a page of 100 holders and 100 waiters, in order, and the totals"
is "$(j "$(counts pg)" 'r[1:4]')" '[110,105,110]' "counts: all 110 held and 105 waiting"
WEIGHT=3 acquire pgw big 10 >/dev/null
is "$(j "$(counts pgw)" 'r[1:4]')" '[3,0,10]' "counts: a holder's weight counts as its units"
# headroom: as counts' above; here three calls apart.
is "$(j "$r" "abs(r[0] - $(redis_ms)) < 60000")" true "status: now_ms is Redis's clock"

lua_done
