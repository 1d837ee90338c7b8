#!/bin/bash
# The agent's Lua scripts on Redis' clock (lua-lib.sh): expiry by it, its
# steps forward and back (and silences, which look the same) and the
# tokens' clock across them and across restarts from a snapshot, the epoch
# key and its data model marker, and the global keys (the fleet clock, the
# census, a record) lost alone.
. "$(dirname "$0")/lua-lib.sh"

# ---- Expiry by the Redis clock -------------------------------------------------
sub exp
r=$(TTL_MS=300 acquire exp h 1)
score=$(rcli ZSCORE "$(key exp holders)" "$(lid h)")
is "$(j "$r" 'r[0]')" 1 "expiry: h holds"
is "$(j "$score" "r - $(j "$r" 'r[2]')")" 300 "expiry: until since + 300 ms"
acquire exp w 1 >/dev/null
# (The waiter's agent asks again as h's lease runs out, which sweeps it; a
# looker, status, drops nothing after what may be a step: a gap of more
# than half of h's lease, the shortest, in every call.)
expired() { acquire exp w 1 >/dev/null; [ "$(j "$(status exp)" '[h[0] for h in r[1] if h[0] == "h"]')" = "[]" ]; }
# headroom: as hh6's, 2.7 s under load; 30 s.
check "expiry: h is dropped once Redis's clock passes its expiry" wait_for 30 expired
check "expiry: that wakes the waiters ('1')" wait_for 5 heard exp 1
is "$(rcli HEXISTS "$(key exp clock)" "$(lid h)")" 0 "expiry: h is forgotten (its record)"
r=$(counted exp)
is "$(j "\"$r\"" 'r.split(" / ")[0] == r.split(" / ")[1][:3] and int(r[-1]) == sum(map(int, r.split()[:2]))')" true \
        "expiry: the counts follow the ZSETs and records ($r)"

# ---- Clock steps ---------------------------------------------------------------
# The fleet's clock key says when a script last ran on any name; setting it
# back (or ahead) is what a step of Redis' clock looks like to the next one.
fleet_offset() { rcli GET "$FLEET_CLOCK" | awk '{ print $2 }'; }
# token_offset: the tokens' clock's offset (ms).
token_offset() { rcli GET "$FLEET_CLOCK" | awk '{ print $4 }'; }
# fleet_id: the key's ID (the clock its offsets are of); fleet_is LAST
# [ERA]: the key says LAST, the same clock (its era ERA, 0 unless given).
fleet_id() { rcli GET "$FLEET_CLOCK" | awk '{ print $7 }'; }
fleet_is() { rcli SET "$FLEET_CLOCK" "$1 $(fleet_offset) ${2:-0} 0 - 0 $(fleet_id)" >/dev/null; }
name_offset() { state "$1" 8; }
acquire fwd h 1 >/dev/null
acquire fwd w 1 >/dev/null
acquire other o 1 >/dev/null
off0=$(fleet_offset)
t=$(redis_ms)
rcli ZADD "$(key fwd holders)" $((t - 1000)) "$(lid h)" >/dev/null
fleet_is $((t - 9000))          # nothing ran for 9 s: a forward step of ~9 s
r=$(acquire fwd x 1)
# x's wait, 10 s from its call, renewed for a minute (as its agent would,
# and no step in this call: the gap since the last is a moment): the checks
# up to its turn below take more than 10 s on a busy machine, and a wait
# that runs out queues again behind y.
TTL_MS=60000 acquire fwd x 1 >/dev/null
is "$(j "$r" 'r[:2]')" "[0,2]" "clock forward: h, stepped past its expiry, still holds (x queues 2nd)"
is "$(j "$(rcli ZSCORE "$(key fwd holders)" "$(lid h)")" "$t + 7000 <= r <= $(redis_ms) + 8000")" true \
        "clock forward: h's expiry moved by the step (9 s)"
is "$(j "$(fleet_offset)" "r - $off0 >= 9000")" true "clock forward: the fleet's offset moved by the step"
is "$(name_offset fwd)" "$(fleet_offset)" "clock forward: the name is on the fleet's offset now"
# Another name, not seen since before the step: moved when it is.
t=$(redis_ms)
rcli ZADD "$(key other holders)" $((t - 500)) "$(lid o)" >/dev/null
is "$(j "$(acquire other p 1)" 'r[0]')" 0 "clock forward: o, on a name seen later, still holds"
is "$(j "$(rcli ZSCORE "$(key other holders)" "$(lid o)")" "r >= $t + 8000")" true "clock forward: ... moved by the step"
release fwd h >/dev/null
t=$(redis_ms)
rcli ZADD "$(key fwd holders)" $((t + 13000)) "$(lid w)" >/dev/null
fleet_is $((t + 5000))          # last call 5 s in the future: the clock went back ~5 s
acquire fwd y 1 >/dev/null
is "$(j "$(rcli ZSCORE "$(key fwd holders)" "$(lid w)")" "$t + 7000 <= r <= $(redis_ms) + 8000")" true \
        "clock back: w keeps the 8 s it had left, not 13 (the step is taken off)"
is "$(j "$(TTL_MS=60000 acquire fwd x 1)" 'r[:2]')" "[0,1]" "clock: x still waits, first in line"
t=$(redis_ms)
rcli ZADD "$(key fwd holders)" $((t - 1)) "$(lid w)" >/dev/null
# 3 s of a 30 s lease: time passing, not a step. The gap z's call sees is
# the 3 s and the commands from redis_ms to its call; headroom: those took
# up to 1 s with three CPU hogs beside the test (load 17 on 2 cores), and
# a step is a gap over 15 s (half the lease), 12 s on: 12 times that.
fleet_is $((t - 3000))
TTL_MS=30000 acquire fwd z 1 >/dev/null
echo "# z's call came $(( $(redis_ms) - t )) ms after t at most"
is "$(rcli ZSCORE "$(key fwd holders)" "$(lid w)")" "" "clock: a gap under half a lease is time: w's lease ended"
is "$(j "$(acquire fwd x 1)" 'r[0]')" 1 "clock: x, first in line, gets in"
# A name nobody called for 9 s while others were called: its agent was cut
# off, not the clock stepped; its lease runs out on time.
acquire cut c 1 >/dev/null
t=$(redis_ms)
rcli ZADD "$(key cut holders)" $((t - 1000)) "$(lid c)" >/dev/null
is "$(j "$(acquire cut q 1)" 'r[0]')" 1 "clock: a name alone unseen is no step: c ran out, q gets in"
# Redis restored from a snapshot 9 s old, its new state's grace ended 5 s
# ago: what it has is old data, not a step; its dead leases run out.
acquire old h 1 >/dev/null
t=$(redis_ms)
rcli ZADD "$(key old holders)" $((t - 1000)) "$(lid h)" >/dev/null
fleet_is $((t - 9000))
before=$(rcli GET "$FLEET_CLOCK")
r=$(status old)
is "$(j "$r" '[h[0] for h in r[1]]')" '["h"]' "clock: status after a step drops nothing..."
is "$(rcli GET "$FLEET_CLOCK")" "$before" "... and writes nothing"
is "$(j "$(GRACE=$((t - 5000)) acquire old x 1)" 'r[0]')" 1 "clock: data older than the grace is no step: h ran out, x gets in"
t=$(redis_ms)
fleet_is $((t - 9000))
rcli ZADD "$(key old holders)" $((t - 1000)) "$(lid x)" >/dev/null
GRACE=$((t - 5000)) renew old x >/dev/null
is "$(rcli ZSCORE "$(key old holders)" "$(lid x)")" "" "clock: ... renew alike (x ran out, and was not renewed)"
is "$(status nock >/dev/null; rcli EXISTS "$(key nock clock)")" 0 "clock: status alone never creates the key"
# Within one Redis state every step counts, also during its grace period,
# and also one that takes the clock back to before the grace began: its
# correction forward is a step too. The fleet's clock key names the state
# its writer knew (its grace_until).
acquire era h 1 >/dev/null
t=$(redis_ms)
g=$((t + 2000))
GRACE=$g renew era h >/dev/null
is "$(rcli GET "$FLEET_CLOCK" | awk '{ print $3 }')" "$g" "clock: the fleet's clock key names the state its writer knew"
rcli ZADD "$(key era holders)" $((t - 1000)) "$(lid h)" >/dev/null
fleet_is $((t - 9000)) "$g"   # back before the grace began, then forward
GRACE=$g acquire era x 1 >/dev/null
is "$(j "$(rcli ZSCORE "$(key era holders)" "$(lid h)")" "r >= $t + 7000")" true \
        "clock: a step forward from before the grace of the same state: h still holds, its expiry moved by the step"
# A re-assertion after a reset knows the reset: the key from before it is
# old data, not a step; and after it, steps count for re-assertions too.
t=$(redis_ms)
rcli ZADD "$(key era holders)" $((t - 1000)) "$(lid h)" >/dev/null
fleet_is $((t - 9000)) "$g"
GRACE=$((g + 5000)) reassert era y 1 5 1 >/dev/null
is "$(rcli ZSCORE "$(key era holders)" "$(lid h)")" "" "clock: a key from before the reset the caller knows is no step: h ran out"
is "$(rcli GET "$FLEET_CLOCK" | awk '{ print $3 }')" "$((g + 5000))" "clock: ... and the key names the new state"
t=$(redis_ms)
rcli ZADD "$(key era holders)" $((t - 1000)) "$(lid y)" >/dev/null
fleet_is $((t - 9000)) $((g + 5000))
GRACE=$((g + 5000)) reassert era z 1 6 1 >/dev/null
is "$(j "$(rcli ZSCORE "$(key era holders)" "$(lid y)")" "r >= $t + 7000")" true "clock: a re-assertion sees a step in its own state: y keeps its lease"
is "$(rcli PTTL "$FLEET_CLOCK")" -1 "clock: the fleet's clock key never expires"
# Leases of different lengths (a slot a host holds itself has host_lease,
# here 4 of the 4-s leases): a gap is judged by the shortest lease among
# the callers (the key's SHORT_MS), not by the caller's own; a step of
# 3 s, under half the long lease, first seen by a long lease's caller, is
# still a step for the short ones (finding 18: the harness' host-held
# `reboot` renewed first after a 7.45-s step, and `solo` granted twice).
fleet_last_is() { rcli SET "$FLEET_CLOCK" "$(rcli GET "$FLEET_CLOCK" | awk -v t="$1" '{ $1 = t; print }')" >/dev/null; }
TTL_MS=16000 acquire mixh r 1 >/dev/null
TTL_MS=4000 acquire mix a 1 >/dev/null
TTL_MS=4000 acquire mix w 1 >/dev/null
is "$(rcli GET "$FLEET_CLOCK" | awk '{ print $6 }')" 4000 "clock: the fleet's clock key keeps the shortest lease of its callers"
t=$(redis_ms)
rcli ZADD "$(key mix holders)" $((t - 1000)) "$(lid a)" >/dev/null
fleet_last_is $((t - 3000))             # a 3-s step: over half the short lease, under half the long
TTL_MS=16000 renew mixh r >/dev/null
is "$(j "$(TTL_MS=4000 acquire mix w 1)" 'r[:2]')" "[0,1]" \
        "clock: a step first seen by a longer lease's caller is a step for the shorter: a still holds, w waits"
is "$(j "$(rcli ZSCORE "$(key mix holders)" "$(lid a)")" "r >= $t + 1500")" true "clock: ... a's expiry moved by the step"
# Such a gap counts once: the short lease's callers may be gone, and the
# long leases' own calls are time again (their dead leases run out).
release mix a >/dev/null
release mix w >/dev/null
t=$(redis_ms)
fleet_last_is $((t - 3000))
TTL_MS=16000 renew mixh r >/dev/null
is "$(rcli GET "$FLEET_CLOCK" | awk '{ print $6 }')" 16000 "clock: a gap only the shorter lease calls a step forgets it"
rcli ZADD "$(key mixh holders)" $((t - 1)) "$(lid r)" >/dev/null
fleet_last_is $((t - 3000))
is "$(j "$(TTL_MS=16000 acquire mixh s 1)" 'r[0]')" 1 "clock: ... then a 3-s gap of the long leases is time: r ran out, s gets in"

# Tokens across a real step of Redis' clock and a restore from a snapshot
# of before it: the step forward, tokens handed out during it, the clock
# put right, then Redis restarted from the older snapshot. Tokens follow
# the tokens' clock, which takes the step out; had they followed TIME,
# those of the step would be ahead of the restored Redis by the step.
emptied        # a clock never stepped before
t=$(redis_us)
t0=$(redis_ms)
ta=$(j "$(acquire step a 5)" 'r[1]')
is "$(j "$ta" "$t < r < $(redis_us)")" true "clock step: a grant before it, on Redis' clock ($ta)"
snapshot before-step "clock step: a snapshot"
step_clock 30000
r=$(acquire step b 5)
tb=$(j "$r" 'r[1]')
is "$(j "$r" 'r[0]')" 1 "clock step: 30 s forward, b is granted"
el=$(( $(redis_ms) - 30000 - t0 ))   # real time since a
is "$(j "$(fleet_offset)" "29000 <= r <= 30000 + $el")" true "clock step: the step is seen (fleet offset $(fleet_offset) ms)"
is "$(j "$(token_offset)" "29000 <= r <= 30000 + $el")" true "clock step: ... also by the tokens' clock"
is "$(j "$tb" "$ta < r < $(redis_us) - 25000000")" true \
        "clock step: b's token $tb is above a's and follows the tokens' clock, not Redis' stepped TIME"
step_clock 0
r=$(acquire step c 5)
tc=$(j "$r" 'r[1]')
is "$(j "$r" 'r[0]')" 1 "clock step: put right, c is granted"
is "$(j "$tc" "$tb < r < $(redis_us) + 1000000")" true "clock step: c's token $tc is above b's, and not ahead of Redis' clock by the step"
restart_from before-step
is "$(state step 5)" "$ta" "clock step: Redis restarted from the snapshot: its counter is a's again"
r=$(GRACE=$(( $(redis_ms) - 1 )) acquire step d 5)
is "$(j "$r" 'r[0]')" 1 "clock step: after the restart (a reset whose grace is over) d is granted"
is "$(j "$r" "r[1] > $tc")" true "clock step: d's token $(j "$r" 'r[1]') is above every token before the restart, c's ($tc) too"

# quiet_for_a_second: Redis' clock moves on by a second or more.
quiet_for_a_second() {
        local t
        t=$(redis_ms)
        wait_for 5 sh -c "[ \$(redis-cli -s '$REDIS_SOCK' TIME | head -n 1) -gt $((t / 1000 + 1)) ]"
}
# Silence looks like a step forward: no agent called for more than half a
# lease. The tokens' clock starts again after it where it may have been at
# the last call, not where the clock key was last written: a counter that
# left Redis in between (an idle name) starts again above its last token.
emptied
TTL_MS=2000 acquire quiet-a a 5 >/dev/null
tq=$(j "$(TTL_MS=2000 acquire quiet-b b 5)" 'r[1]')
quiet_for_a_second
left_idle quiet-b
r=$(TTL_MS=2000 acquire quiet-b c 5)
is "$(j "$r" "r[1] > $tq")" true "silence: a counter that left Redis starts above its last token ($(j "$r" 'r[1]') > $tq)"
# A release on a name with no keys (a lease Redis lost) knows no lease: it
# sees no step, and moves neither the tokens' clock nor any expiry.
before=$(rcli GET "$FLEET_CLOCK")
for i in 1 2 3 4 5; do release "gone$i" x >/dev/null; done
is "$(rcli GET "$FLEET_CLOCK")" "$before" "release: of leases on names Redis lost moves no offset, and writes no time"
# Redis restarted from its own snapshot, which has the epoch in it: no agent
# knows of a reset, and the time since the snapshot looks like a step. It
# is no step of tokens (another Redis process): tokens handed out since
# the snapshot stay below the next.
snapshot before-restart "restart: a snapshot"
quiet_for_a_second
tr=$(j "$(TTL_MS=10000 acquire quiet-b d 5)" 'r[1]')      # no step: its lease is 10 s
restart_from before-restart
r=$(TTL_MS=2000 acquire quiet-b e 5)
is "$(j "$r" "r[0] == 1 and r[1] > $tr")" true \
        "restart: from a snapshot older than half a lease, the next token is above the last before it ($(j "$r" 'r[1]') > $tr)"

# Nor does it swallow a step: the next caller with a lease still sees it.
o=$(fleet_offset)
step_clock 30000
release gone6 x >/dev/null
TTL_MS=10000 acquire quiet-c a 5 >/dev/null
is "$(j "$(fleet_offset)" "r >= $o + 29000")" true "release: after a step, one that knows no lease leaves it to the next caller to see"
# A step back seen: the tokens' clock is never ahead of Redis' clock, so a
# counter that starts again after it is not either.
s1=$(j "$(TTL_MS=10000 acquire quiet-c b 5)" 'r[1]')
step_clock 0
r=$(TTL_MS=10000 acquire quiet-d a 5)
is "$(j "$r" "r[1] < $(redis_us)")" true "step back: a new counter starts on Redis' clock, not 30 s ahead ($(j "$r" 'r[1]'))"
# A step back from the right time, then the step that puts it right: the
# two take out nothing between them (chaos finding 21), so a counter lost
# after them starts above the tokens handed out before the step back.
# (The offset before it holds the silences of this test so far, as many
# as a slow machine made: the step back is measured from it.)
tk=$(j "$(TTL_MS=10000 acquire back k 5)" 'r[1]')
o=$(token_offset)
step_clock -20000
TTL_MS=10000 acquire back-x a 5 >/dev/null
o2=$(token_offset)
is "$(j "$o2" "r <= $o - 10000")" true \
        "step back: the tokens' offset keeps it ($o ms, then $o2 ms)"
step_clock 0
TTL_MS=10000 acquire back-y a 5 >/dev/null
left_idle back
r=$(TTL_MS=10000 acquire back m 5)
is "$(j "$r" "r[0] == 1 and r[1] > $tk")" true \
        "step back, then put right: a counter lost after them starts above the token before them ($(j "$r" 'r[1]') > $tk)"
# A snapshot saved during a forward step, restored after it was put right:
# another Redis process, whose tokens' clock is the server's again.
step_clock 30000
TTL_MS=10000 acquire quiet-e a 5 >/dev/null
snapshot in-step "restart: a snapshot during a step"
step_clock 0
te=$(j "$(TTL_MS=10000 acquire quiet-e b 5)" 'r[1]')
restart_from in-step
left_idle quiet-e
r=$(TTL_MS=10000 acquire quiet-e c 5)
is "$(j "$r" "r[0] == 1 and r[1] > $te")" true "restart: from a snapshot saved during the step, the next token is above those after it"

# ---- Epoch ---------------------------------------------------------------------
t0=$(redis_ms)
e1=$(epoch 0123456789abcdef0123456789abcdef 5000)
is "$(j "$e1" 'r[0]')" 1 "epoch: the first call creates it"
like "$(j "$e1" 'r[1]')" '^0123456789abcdef0123456789abcdef [0-9]+$' "epoch: value 'ID GRACE_UNTIL_MS'"
is "$(j "$e1" "$t0 + 5000 <= int(r[1].split()[1]) <= $(redis_ms) + 5000")" true "epoch: grace until now + 5000 ms"
e2=$(epoch fedcba9876543210fedcba9876543210 5000)
is "$(j "$e2" '[r[0], r[1]]')" "$(j "$e1" '[0, r[1]]')" "epoch: the second call finds the same value"
is "$(j "$e2" "$t0 <= r[2] <= $(redis_ms)")" true "epoch: with Redis' time in ms"
is "$(rcli PTTL "$EPOCH_KEY")" -1 "epoch: the key never expires"
emptied
e3=$(epoch 00000000000000000000000000000003 5000)
is "$(j "$e3" '[r[0], r[1].split()[0]]')" '[1,"00000000000000000000000000000003"]' "epoch: after FLUSHALL a new one"
emptied
e4=$(epoch 00000000000000000000000000000004 5000 aaaa 500)
is "$(j "$e4" 'r[0]')" 1 "epoch: with a master's run id, the first call creates it"
like "$(j "$e4" 'r[1]')" '^00000000000000000000000000000004 [0-9]+ aaaa$' "epoch: ... naming that master"
e5=$(epoch 00000000000000000000000000000005 5000 aaaa 500)
is "$(j "$e5" '[r[0], r[1]]')" "$(j "$e4" '[0, r[1]]')" "epoch: the same master finds it"
t0=$(redis_ms)
e6=$(epoch 00000000000000000000000000000006 100 bbbb 3000)
is "$(j "$e6" '[r[0], r[1].split()[0], r[1].split()[2]]')" '[2,"00000000000000000000000000000006","bbbb"]' \
        "epoch: another master (a failover) replaces it, and says so"
is "$(j "$e6" "$t0 + 3000 <= int(r[1].split()[1]) <= $(redis_ms) + 3000")" true "epoch: ... with the longer grace"
# The same process with a new replication id and no history (a master
# creates its backlog for its first replica, or drops it): no failover.
# Without that word (a promotion keeps the id it followed as its history)
# the same run id with another replication id is one.
RUN=$(printf 'r%.0s' $(seq 40) | tr r 1) R1=$(printf '2%.0s' $(seq 40)) R2=$(printf '3%.0s' $(seq 40)) R3=$(printf '4%.0s' $(seq 40))
emptied
e7=$(epoch 00000000000000000000000000000007 0 "$RUN$R1" 3000)
fresh_epoch() {    # ID MASTER_ID FRESH: as the agent calls it, knowing none
        args epoch id="$1" grace_ms=0 master_id="$2" failover_grace_ms=3000 known_id= known_grace_until_ms= replid_fresh="$3"
        rcli --json FCALL "${FN[epoch]}" 1 "$EPOCH_KEY" "${ARGS_OUT[@]}"
}
e8=$(fresh_epoch 00000000000000000000000000000008 "$RUN$R2" 1)
is "$(j "$e8" '[r[0], r[1].split()[0], r[1].split()[1] == "'"$(j "$e7" 'r[1].split()[1]')"'"]')" \
        '[0,"00000000000000000000000000000007",true]' "epoch: a new replication id without history: the same epoch, its grace as it was"
is "$(rcli GET "$EPOCH_KEY" | cut -d' ' -f3)" "$RUN$R2" "epoch: ... naming the master as it is now"
e9=$(fresh_epoch 00000000000000000000000000000009 "$RUN$R3" 0)
is "$(j "$e9" '[r[0], r[1].split()[0]]')" '[2,"00000000000000000000000000000009"]' \
        "epoch: a new replication id with a history (a promotion), the same run id: a failover, a new epoch"
e10=$(fresh_epoch 00000000000000000000000000000010 "$(printf '5%.0s' $(seq 40))$R1" 1)
is "$(j "$e10" 'r[0]')" 2 "epoch: another run id is another master, history or none"

# A failover that flaps back to a master that never caught up (chaos
# finding 9): the same Redis process, its run id and its epoch come back
# with data older than an epoch the agents knew, and the time since that
# data was written looks like a clock step within one process. The agents
# pass the epoch they knew: older data is a reset (a new epoch and grace),
# and the next token is above every token of the lost state.
# keep_state / back_to_kept: this Redis' data copied aside (database 1)
# and back, the same process.
keep_state() { rcli -n 1 FLUSHDB >/dev/null; local k; for k in $(rcli KEYS '*'); do rcli COPY "$k" "$k" DB 1 >/dev/null; done; }
back_to_kept() { rcli FLUSHDB >/dev/null; local k; for k in $(rcli -n 1 KEYS '*'); do rcli -n 1 COPY "$k" "$k" DB 0 >/dev/null; done; }
epoch_knowing() {  # ID KNOWN_ID KNOWN_GRACE_UNTIL_MS: as a standalone agent calls it, grace 0
        args epoch id="$1" grace_ms=0 master_id= failover_grace_ms=0 known_id="$2" known_grace_until_ms="$3"
        rcli --json FCALL "${FN[epoch]}" 1 "$EPOCH_KEY" "${ARGS_OUT[@]}"
}
until_of() { j "$1" 'r[1].split()[1]'; }
emptied
ea=$(epoch_knowing aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa "" "")
ga=$(until_of "$ea")
TTL_MS=1000 GRACE=$ga acquire flap h1 5 >/dev/null
quiet_for_a_second                           # a silence: its tokens' offset grows by it
TTL_MS=1000 GRACE=$ga acquire flap h0 5 >/dev/null
is "$(rcli GET "$FLEET_CLOCK" | awk '{ print ($4 >= 900) }')" 1 "flapping failover: the first master's tokens' offset grew by the silence"
keep_state                                   # the master that stops following
rcli FLUSHDB >/dev/null                      # the other one takes over and lost it
quiet_for_a_second
eb=$(epoch_knowing bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa "$ga")
gb=$(until_of "$eb")
is "$(j "$eb" 'r[0]')" 1 "flapping failover: the master that took over lost the epoch: a new one"
tb=$(j "$(TTL_MS=1000 GRACE=$gb acquire flap h2 5)" 'r[1]')
r=$(epoch_knowing cccccccccccccccccccccccccccccccc aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa "$ga")
is "$(j "$r" '[r[0], r[1].split()[0]]')" '[0,"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"]' \
        "flapping failover: an agent that knew an older epoch finds the newer one holding (no new reset)"
back_to_kept                                 # the first master is back, its old data with it
t0=$(redis_ms)
r=$(epoch_knowing dddddddddddddddddddddddddddddddd bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb "$gb")
is "$(j "$r" '[r[0], r[1].split()[0]]')" '[3,"dddddddddddddddddddddddddddddddd"]' \
        "flapping failover: an epoch older than the one the agent knew is a reset, and says so"
gd=$(until_of "$r")
is "$(j "$gd" "r >= $t0")" true "flapping failover: ... whose grace ends no earlier than Redis' time now"
r=$(TTL_MS=1000 GRACE=$gd acquire flap h3 5)
is "$(j "$r" "r[0] == 1 and r[1] > $tb")" true \
        "flapping failover: the next token is above those of the lost state ($(j "$r" 'r[1]') > $tb)"
r=$(epoch_knowing eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee "" "")
is "$(j "$r" '[r[0], r[1].split()[0]]')" '[0,"dddddddddddddddddddddddddddddddd"]' \
        "flapping failover: a fresh agent (no epoch known) finds the new one"
rcli -n 1 FLUSHDB >/dev/null
# A Redis declared empty (fleetsem redis-init: an epoch whose grace ended,
# 0) replaced by another declared so, under agents that knew the first:
# their data went, and the grace keeps their holders' slots.
emptied
rcli SET "$EPOCH_KEY" "ffffffffffffffffffffffffffffffff 0" >/dev/null
r=$(epoch_knowing 99999999999999999999999999999999 11111111111111111111111111111111 0)
is "$(j "$r" '[r[0], r[1].split()[0]]')" '[3,"99999999999999999999999999999999"]' \
        "a declared-empty epoch not the one the agent knew (declared empty too) is a reset"
r=$(epoch_knowing 88888888888888888888888888888888 "" "")
is "$(j "$r" '[r[0], r[1].split()[0]]')" '[0,"99999999999999999999999999999999"]' \
        "... which an agent that knew none finds holding"

# The data model marker beside the epoch (P:model, "N V"), read and
# written by the epoch script at connect: an agent of model 2 writes its
# own where there is none or an older one, and refuses a newer one or one
# it cannot read ({4, marker}), leaving both keys as they were.
MODEL_KEY=fleetsem:model
epoch_model() {    # ID: as a standalone agent of data model 2 calls it
        args epoch id="$1" grace_ms=0 master_id= failover_grace_ms=0 known_id= known_grace_until_ms= replid_fresh=0 \
                model="2 0.2"
        rcli --json FCALL "${FN[epoch]}" 2 "$EPOCH_KEY" "$MODEL_KEY" "${ARGS_OUT[@]}"
}
emptied
r=$(epoch_model 0000000000000000000000000000000a)
is "$(j "$r" 'r[0]')" 1 "model: the first agent makes the epoch ..."
is "$(rcli GET "$MODEL_KEY")" "2 0.2" "model: ... and the marker, 'N V'"
rcli SET "$MODEL_KEY" "1 0.1" >/dev/null
r=$(epoch_model 0000000000000000000000000000000b)
is "$(j "$r" '[r[0], r[1].split()[0]]')" '[0,"0000000000000000000000000000000a"]' "model: an older marker: the epoch holds ..."
is "$(rcli GET "$MODEL_KEY")" "2 0.2" "model: ... and the marker is this model's"
was=$(rcli GET "$EPOCH_KEY")
for m in "99 9.9" "3x" "" "3 0.3 more"; do
        rcli SET "$MODEL_KEY" "$m" >/dev/null
        r=$(epoch_model 0000000000000000000000000000000c)
        is "$(j "$r" 'r[:2]')" "[4,\"$m\"]" "model: marker '$m' (newer, or unreadable): refused, and said"
        is "$(rcli GET "$MODEL_KEY") / $(rcli GET "$EPOCH_KEY")" "$m / $was" "model: ... the marker and the epoch left alone"
done
rcli SET "$MODEL_KEY" "99 9.9" >/dev/null
r=$(epoch 0000000000000000000000000000000d 0)
is "$(j "$r" 'r[0]')" 0 "model: a caller that passes no marker key is not asked"

# An epoch that follows its master's first hash slot after a resharding
# (follow.lua): compare-and-set, so that an agent that read an older epoch
# never puts it back over a newer one of the same master.
FKEY='fleetsem:epoch:{x}' FMKEY='fleetsem:model:{x}'
follow() {         # VALUE [MARKER]
        args follow value="$1" model="${2:-2 0.2}"
        rcli FCALL "${FN[follow]}" 2 "$FKEY" "$FMKEY" "${ARGS_OUT[@]}"
}
emptied
old="aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa 2000 $RUN$R1" new="bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb 5000 $RUN$R2"
is "$(follow "$old")" 1 "follow: none there: written"
is "$(rcli GET "$FKEY") / $(rcli GET "$FMKEY")" "$old / 2 0.2" "follow: ... the epoch and the marker"
rcli SET "$FKEY" "$new" >/dev/null
is "$(follow "$old")" 0 "follow: a newer epoch of the same master there: not written"
is "$(rcli GET "$FKEY")" "$new" "follow: ... the epoch did not go back"
is "$(follow "${new/5000/4999}")" 0 "follow: ... nor for an older grace by a millisecond"
is "$(follow "$new")" 0 "follow: the same epoch: nothing to write"
other="cccccccccccccccccccccccccccccccc 9000 $(printf '5%.0s' $(seq 40))$R1"
rcli SET "$FKEY" "$other" >/dev/null
is "$(follow "$old")" 1 "follow: another master's epoch (moved here with its slot): replaced"
is "$(rcli GET "$FKEY")" "$old" "follow: ... by this master's"
is "$(follow "$new")" 1 "follow: an older epoch of the same master: replaced by the newer"
rcli SET "$FMKEY" "3 0.3" >/dev/null
follow "$new" >/dev/null
is "$(rcli GET "$FMKEY")" "3 0.3" "follow: a newer marker there stays"
rcli SET "$FMKEY" "1 0.1" >/dev/null
follow "$new" >/dev/null
is "$(rcli GET "$FMKEY")" "2 0.2" "follow: an older one becomes this model's"
like "$(follow "not an epoch" 2>&1)" 'not an epoch' "follow: a malformed value is refused"
is "$(rcli GET "$FKEY")" "$new" "follow: ... and nothing written"

# ---- Global keys lost alone: the fleet clock, the census, a record -----------
# The fleet clock key lost after its offset gathered a silence (or a step):
# a new clock, never offset 0 of the old one; the name's expiries do not
# move back by the offset (they would all have run out: w granted beside h).
emptied
TTL_MS=10000 acquire gk h 1 >/dev/null
TTL_MS=10000 acquire gk w 1 >/dev/null
tok=$(rec gk h 4)
t=$(redis_ms)
fleet_is $((t - 20000))         # nothing ran for 20 s: the offset gathers 20 s
TTL_MS=10000 renew gk h >/dev/null
is "$(j "$(fleet_offset)" 'r >= 19000')" true "fleet clock lost: first, an offset of 20 s gathered ($(fleet_offset))"
id0=$(fleet_id)
rcli DEL "$FLEET_CLOCK" >/dev/null
r=$(TTL_MS=10000 acquire gk w 1)
is "$(j "$r" 'r[:2]')" "[0,1]" "fleet clock lost: h still holds, w waits"
is "$(j "$(rcli ZSCORE "$(key gk holders)" "$(lid h)")" "r >= $t + 8000")" true "fleet clock lost: h's expiry did not move back"
is "$(fleet_offset) $(state gk 10)" "0 $(fleet_id)" "fleet clock lost: a new clock at offset 0, the name on it"
is "$(j "$(fleet_id)" "r != $id0")" true "fleet clock lost: ... with a new id"
left_idle gk
is "$(j "$(TTL_MS=10000 acquire gk2 a 1)" "r[1] > $tok")" true "fleet clock lost: tokens do not go back"
# A name nobody called since the key was lost: a gap (or a step) may have
# gone unseen, so what would run out within a lease gets one from now.
TTL_MS=10000 acquire gk3 h 1 >/dev/null
rcli DEL "$FLEET_CLOCK" >/dev/null
TTL_MS=10000 acquire gk2 b 1 >/dev/null      # another name makes the new clock
t=$(redis_ms)
rcli ZADD "$(key gk3 holders)" $((t - 1000)) "$(lid h)" >/dev/null
is "$(j "$(TTL_MS=10000 acquire gk3 w 1)" 'r[:2]')" "[0,1]" \
        "fleet clock lost: a name from before it keeps its holder, whose time ran out unseen"
is "$(j "$(rcli ZSCORE "$(key gk3 holders)" "$(lid h)")" "r >= $t + 9000")" true "fleet clock lost: ... given a lease from now"
# A step of Redis' clock, seen, then the key lost: the same.
TTL_MS=10000 acquire gk4 h 1 >/dev/null
step_clock 30000
TTL_MS=10000 renew gk4 h >/dev/null
is "$(j "$(fleet_offset)" 'r >= 29000')" true "fleet clock lost after a step: the step seen ($(fleet_offset))"
rcli DEL "$FLEET_CLOCK" >/dev/null
is "$(j "$(TTL_MS=10000 acquire gk4 w 1)" 'r[:2]')" "[0,1]" "fleet clock lost after a step: h still holds, w waits"
step_clock 0
is "$(j "$(TTL_MS=10000 acquire gk4 w 1)" 'r[:2]')" "[0,1]" "fleet clock lost after a step: ... also once the clock is put right"
is "$(j "$(rcli ZSCORE "$(key gk4 holders)" "$(lid h)")" "r >= $(redis_ms) + 5000")" true \
        "fleet clock lost after a step: ... h's time left taken off the step back, not more"
# The census lost, made again by a call on another name: the held name's
# entry is written again by its next call, so that a loss of its keys
# later still counts as a loss (w waits, not granted beside h).
emptied
TTL_MS=10000 acquire cz h 1 >/dev/null
rcli DEL "$CENSUS" >/dev/null
TTL_MS=10000 acquire cz-other o 1 >/dev/null
is "$(rcli ZSCORE "$CENSUS" 'fleetsem:{cz}')" "" "census lost: the held name is not in the new census..."
TTL_MS=10000 renew cz h >/dev/null
is "$(j "$(rcli ZSCORE "$CENSUS" 'fleetsem:{cz}')" "r > $(redis_ms)")" true "census lost: ... until its next renewal"
t=$(redis_ms)
rcli ZADD "$CENSUS" $((20000 - t)) . >/dev/null     # the new census older than a lease
rcli DEL "$(key cz holders)" "$(key cz queue)" "$(key cz waiters)" "$(key cz clock)" >/dev/null
r=$(TTL_MS=10000 acquire cz w 1)
is "$(j "$r" 'r[0]')" 0 "census lost, then the name's keys: w is not granted (the name was forgotten)"
is "$(j "$r" '0 < r[5] <= 10000')" true "census lost, then the name's keys: ... for a lease"
# A census 8 s old (of a 10-s lease) that lacks a name whose keys went:
# forgotten now, a whole lease of grace, not the 2 s left of the census'
# first lease (its holder's agent, which renewed since, would take its
# slot for lost rather than put it back).
TTL_MS=10000 acquire cz2 h 1 >/dev/null
t=$(redis_ms)
rcli ZADD "$CENSUS" $((8000 - t)) . >/dev/null
rcli ZREM "$CENSUS" 'fleetsem:{cz2}' >/dev/null
rcli DEL "$(key cz2 holders)" "$(key cz2 queue)" "$(key cz2 waiters)" "$(key cz2 clock)" >/dev/null
r=$(TTL_MS=10000 renew cz2 h)
is "$(j "$r" 'r[0] > 9000')" true "census young, a name's keys lost: a whole lease of grace from now ($(j "$r" 'r[0]') ms)"
# The census lost with nobody's call in between: the held name's own call
# makes it again, with its entry.
rcli DEL "$CENSUS" >/dev/null
TTL_MS=10000 renew cz-other o >/dev/null
is "$(j "$(rcli --json ZMSCORE "$CENSUS" 'fleetsem:{cz-other}' .)" 'r[0] is not None and r[1] is not None')" true \
        "census lost: a held name's renewal makes it again, with its entry and mark"
rcli ZADD "$CENSUS" -1 . >/dev/null     # (seeded again: the names below are new)
# A name the census lost that then goes a lease with no renewal (nobody
# held or waited), is granted, and loses its keys before its holder's
# first renewal: the grant wrote its entry back, so the next call finds
# it forgotten and grants nothing beside the holder. The same for a slot
# handed over by a release.
for how in acquire release; do
        n=cq-$how
        TTL_MS=10000 acquire "$n" x 1 >/dev/null
        [ $how = release ] && TTL_MS=10000 acquire "$n" h 1 >/dev/null
        rcli DEL "$CENSUS" >/dev/null
        TTL_MS=10000 acquire "cq-other-$how" o 1 >/dev/null
        t=$(redis_ms)
        rcli ZADD "$CENSUS" $((20000 - t)) . >/dev/null     # a lease of quiet since
        is "$(rcli ZSCORE "$CENSUS" "fleetsem:{$n}")" "" "census lost, a lease quiet ($how): the name is not in it..."
        if [ $how = acquire ]; then
                TTL_MS=10000 release "$n" x >/dev/null
                r=$(TTL_MS=10000 acquire "$n" h 1)
        else
                r=$(TTL_MS=10000 release "$n" x)
                r=$(j "$r" '[1 if r[1:2] == ["h"] else 0]')     # h handed the slot
        fi
        is "$(j "$r" 'r[0]')" 1 "census lost, a lease quiet ($how): ... h is granted"
        is "$(j "[$(rcli ZSCORE "$CENSUS" "fleetsem:{$n}")]" "r[:1] > [$(redis_ms)]")" true \
                "census lost, a lease quiet ($how): ... and the grant wrote the name's entry back"
        rcli DEL "$(key "$n" holders)" "$(key "$n" queue)" "$(key "$n" waiters)" "$(key "$n" clock)" >/dev/null
        r=$(TTL_MS=10000 acquire "$n" w 1)
        is "$(j "$r" '[r[0], len(r) > 5 and 0 < r[5] <= 10000]')" "[0,true]" \
                "census lost, a lease quiet, granted, then the name's keys ($how): w is not granted beside h"
done
# One holder's record lost (HDEL of its field), its entry still there: its
# renewal says the name was forgotten, so its agent puts it back.
acquire hd h 1 >/dev/null
acquire hd w 1 >/dev/null
tok=$(rec hd h 4)
rcli HDEL "$(key hd clock)" "$(lid h)" >/dev/null
r=$(renew hd h w)
is "$(j "$r" 'r[1:]')" '["h"]' "record lost: the holder is missing at its renewal"
is "$(j "$r" '0 < r[0] <= 10000')" true "record lost: ... and the name grants nothing for a lease ($(j "$r" 'r[0]') ms): put back, not lost"
is "$(j "$(acquire hd w 1)" 'r[0]')" 0 "record lost: the waiter still waits"
is "$(reassert hd h 1 "$tok" 1)" 1 "record lost: its agent puts the holder back"
is "$(rec hd h 4) $(counted hd)" "$tok 1 1 / 1 1 2" "record lost: ... with its token, counted once"
# The same losses found by an adoption (the holder's agent restarted
# before a renewal): forgotten, not gone, so that its agent puts the
# holder back; a release still reads gone.
acquire ad h 1 >/dev/null
acquire ad w 1 >/dev/null
tok=$(rec ad h 4) since=$(rec ad h 5)
rcli ZREM "$(key ad holders)" "$(lid h)" >/dev/null
is "$(adopt ad h)" "[2,$tok,$since,\"INFO lease=h\"]" "adopt, entry lost: forgotten, with the record's token, since and description"
is "$(j "$(acquire ad w 1)" '[r[0], 0 < r[5] <= 10000]')" "[0,true]" "adopt, entry lost: ... and the name grants nothing for a lease"
is "$(reassert ad h 1 "$tok" "$since")" 1 "adopt, entry lost: its agent puts the holder back"
is "$(rec ad h 4) $(counted ad)" "$tok 1 1 / 1 1 2" "adopt, entry lost: ... with its token, counted once"
rcli HDEL "$(key ad clock)" "$(lid h)" >/dev/null
r=$(adopt ad h)
is "$(j "$r" "[r[0], r[1] > $tok, r[3]]")" '[2,true,""]' \
        "adopt, record lost: forgotten, with a new token above the name's, no description"
tok2=$(j "$r" 'r[1]')
is "$(state ad 5)" "$tok2" "adopt, record lost: ... the name's last token"
is "$(j "$(acquire ad w 1)" 'r[0]')" 0 "adopt, record lost: ... the waiter still waits"
is "$(reassert ad h 1 "$tok2" "$(j "$r" 'r[2]')")" 1 "adopt, record lost: its agent puts the holder back"
is "$(rec ad h 4) $(counted ad)" "$tok2 1 1 / 1 1 2" "adopt, record lost: ... with the new token, counted once"
rcli DEL "$(key ad clock)" >/dev/null
is "$(j "$(adopt ad h)" "[r[0], r[1] > $tok2]")" '[2,true]' "adopt, the name's hash lost: forgotten, with a new token"
is "$(adopt ad w)" "[-1]" "adopt, the name's hash lost: a waiter (neither record nor entry) is gone"
is "$(reassert ad h 1 "$tok2" 1)" 1 "adopt, the name's hash lost: its agent puts the holder back"
release ad h >/dev/null
is "$(adopt ad h)" "[-1]" "adopt: a holder released is gone, in the lease after the name was forgotten too"
# The census expires with its latest entry, when its names' keys have all
# left, and the fleet's clock key keeps that time (its 8th word): found
# missing from then on, it left with its names (a new name is granted at
# once); found missing before, it was lost (a name without its state is
# forgotten).
emptied
IDLE=1500 acquire ce h 1 >/dev/null
IDLE=1500 release ce h >/dev/null
top=$(rcli ZRANGE "$CENSUS" -1 -1 WITHSCORES | tail -n 1)
is "$(rcli GET "$FLEET_CLOCK" | awk '{ print $8 }')" "$top" "census: the clock key says when it expires, its latest entry's time"
like "$(rcli PTTL "$CENSUS")" '^[1-9][0-9]*$' "census: ... and it expires"
check "census: it leaves with its last name" wait_for 10 sh -c "[ \"\$(redis-cli -s '$REDIS_SOCK' EXISTS '$CENSUS' \
        'fleetsem:{ce}:clock')\" = 0 ]"
is "$(j "$(acquire ce2 n 1)" 'r[0]')" 1 "census left with its names: a new name is granted at once"
is "$(rcli ZSCORE "$CENSUS" .)" -1 "census left with its names: ... made again as a seeded one"
acquire ce3 h 1 >/dev/null
rcli DEL "$CENSUS" >/dev/null
rcli DEL "$(key ce3 holders)" "$(key ce3 queue)" "$(key ce3 waiters)" "$(key ce3 clock)" >/dev/null
r=$(acquire ce3 w 1)
is "$(j "$r" '[r[0], 0 < r[5] <= 10000]')" "[0,true]" "census lost before its time, then a name's keys: forgotten, not new"
acquire ce4 h 1 >/dev/null
fleet_limit ce4 1 >/dev/null
is "$(rcli PTTL "$CENSUS") $(rcli GET "$FLEET_CLOCK" | awk '{ print $8 }')" "-1 0" \
        "census: an entry that never leaves (a fleet limit): it never expires, and the clock key says so"
fleet_limit ce4 0 >/dev/null
rcli ZADD "$CENSUS" -1 . >/dev/null     # (seeded again)

# A lease named as the state's field is refused (the agent never sends one).
like "$(lua dot acquire . 1 10000 x a 1000 0 600000 1 0 2>&1)" "ERR fleetsem: argument 1 \(lease\) of acquire: not a lease id" \
        "state: a lease named '.' is refused"
is "$(rcli HGET "$(key dot clock)" .)" "" "... and writes nothing"
# The first data model's keys: a name whose `clock` is a string that an
# agent of it wrote within two of its leases is refused, by name; after
# that, the name starts again (its dead holders gone).
t=$(redis_ms)
rcli SET "$(key old1 clock)" "$((t - 5000)) 10000 0" >/dev/null
rcli ZADD "$(key old1 holders)" $((t + 5000)) "$(lid oldlease)" >/dev/null
r=$(acquire old1 n 1 2>&1)
like "$r" "FLEETSEM fleetsem:\\{old1\\}:clock is of data model 1 \\(fleetsem 0\\.1\\).*this agent speaks data model 2 \\(fleetsem >= 0\\.2\\)" "first model: a name an earlier agent uses is refused: $r"
is "$(rcli TYPE "$(key old1 clock)") $(rcli ZCARD "$(key old1 holders)")" "string 1" "... and left as it was"
rcli SET "$(key old1 clock)" "$((t - 25000)) 10000 0" >/dev/null
r=$(acquire old1 n 1)
is "$(j "$r" 'r[:1]')" "[1]" "first model: two leases after its last use the name is taken over: granted"
is "$(rcli ZRANGE "$(key old1 holders)" 0 -1 | unlid)" n "... the old holder gone"
is "$(counted old1)" "1 0 / 1 0 1" "... and counted"

lua_done
