#!/bin/bash
# A Cluster of 40 masters whose addresses all change at once, as in a
# redeploy: the agent reads each new map beside the one in force and
# swaps it in whole, so it follows however many masters move. The masters
# are nodes of the test's own (tests/fake-cluster-many.py), each on a port
# of its own, forwarding to one real node that owns every hash slot and
# answering CLUSTER SLOTS with the 16384 slots shared out among them. After
# the move the old nodes answer MOVED to the new ones (the first word the
# agent has of it), then give the new map. A holder and a waiter live
# through it: the holder's slot stays its own, the waiter gets the slot
# once it is released, through the new masters; every connection to an
# old one is closed. Then fleetsemd --load-library on 70 masters.
# headroom: a 6-s lease, renewed each 2 s, several times over the swap;
# a 2-s lease ran out during the swap of 40 with load averages of 30-44.
TTL=6s
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-cluster.sh"
N=40

# many_masters OUT N: start a Cluster of N masters over the real node P,
# its lines in OUT; sets PROXY (its pid) and SEED (its seed's port).
many_masters() {
        python3 "$(dirname "$0")/fake-cluster-many.py" "$P" "$2" >"$1" 2>&1 &
        PROXY=$!
        if ! wait_for 30 grep -q '^listening ' "$1"; then
                sed 's/^/# /' "$1"
                bail "the Cluster of $2 masters did not start"
        fi
        SEED=$(awk '$1 == "listening" { print $2 }' "$1")
}

cluster_one_node
many_masters "$T/fake.out" "$N"
fake=$PROXY F=$SEED
gen_ports() { awk -v g="$1" '$1 == "master" && $2 == g { print $3 }' "$T/fake.out"; }
mapfile -t OLD < <(gen_ports 0)
is "${#OLD[@]}" "$N" "the fake Cluster has $N masters"
CLUSTER_URL="cluster://fleetsem@127.0.0.1:$F"
cluster_agent a

check "the agent is up on the $N masters" \
        wait_for 30 sh -c "FLEETSEM_NAMESPACE=$NSBASE-a $FLEETSEM metrics | grep -qx 'fleetsem_redis_up 1'"
fs a run --slots 1 --wait 20s first -- true
is "$?" 0 "a job gets a slot through the $N masters"

# A holder, and a waiter queued behind it, on the one slot of "many".
job a many &
holder=$!
check "the holder has the slot" wait_for 20 grep -q '^enter' "$T/events-many"
fs a run --slots 1 --wait 60s many -- sh -c "echo waiter >'$T/waiter-ran'" &
waiter=$!
zcard_is() { [ "$(ccli "$P" ZCARD "fleetsem:{many}:$1")" = "$2" ]; }
check "the waiter is queued" wait_for 20 zcard_is queue 1

# ---- Every master on a new port at once ---------------------------------------------
is "$(ccli "$F" FAKE READDRESS)" OK "every master moves to a new port"
mapfile -t NEW < <(gen_ports 1)
is "${#NEW[@]}" "$N" "... $N new ones"
# Each master's connections: as many closed as made.
open_to() {
        awk '$1 == "accepted" { n[$2]++ } $1 == "closed" { n[$2]-- } END { for (p in n) if (n[p]) print p }' \
                "$T/fake.out" | sort -n
}
old_open() { printf '%s\n' "${OLD[@]}" | sort -n | comm -12 - <(open_to); }
all_new_open() { [ "$(printf '%s\n' "${NEW[@]}" | sort -n | comm -12 - <(open_to) | wc -l)" = "$N" ]; }
check "the agent connects to all $N new masters" wait_for 60 all_new_open
no_old_open() { [ -z "$(old_open)" ]; }
check "... and closes every connection to the old ones" wait_for 30 no_old_open
is "$(old_open | tr '\n' ' ')" "" "no connection to an old master is left open"
# (Where one is: the port's record in the fake, and which process holds
# each end of its sockets, the agent or the fake.)
for p in $(old_open); do
        echo "# port $p in the fake's record: $(awk -v p="$p" '$2 == p { printf "%s ", $1 }' "$T/fake.out")"
        ss -tnpH "( sport = :$p or dport = :$p )" 2>&1 | sed 's/^/#   /'
done
check "the agent is up on the new masters" \
        wait_for 30 sh -c "FLEETSEM_NAMESPACE=$NSBASE-a $FLEETSEM metrics | grep -qx 'fleetsem_redis_up 1'"

# MOVED to a new address came first, and the agent went there.
moved=$(awk '$1 == "moved" { print $3; exit }' "$T/fake.out")
check "an old master answered MOVED to a new one" [ -n "$moved" ]
check "... which the agent followed" grep -q "^accepted $moved\$" "$T/fake.out"
agent_lacks a 'unusable answer to CLUSTER SLOTS|the map before stays in force' \
        "the agent followed the new map whole (and never refused one)"
# (How many: the fake's counts above, every old connection closed; the
# journal's lines of it may be rate-limited in a burst of $N.)
check "the agent says it let go of the old masters" grep -q 'no master of the map any more' "$T/agent-a.log"

# ---- No call lost across the swap ---------------------------------------------------
check "the holder still holds the slot" zcard_is holders 1
check "... and the waiter still waits" zcard_is queue 1
check "... and runs" kill -0 "$holder"
touch "$T/go-many"
wait "$holder"
is "$?" 0 "the holder exits 0"
wait "$waiter"
is "$?" 0 "the waiter gets the slot once it is released"
check "... and runs" [ -f "$T/waiter-ran" ]
owner_new=$(awk -v s="$(cluster_keyslot '{many}')" -v n="$N" \
        'BEGIN { for (i = 0; i < n; i++) if (int(i * 16384 / n) <= s && s < int((i + 1) * 16384 / n)) print i }')
check "... through the master that owns the slot now (${NEW[$owner_new]})" \
        grep -q "^fcall ${NEW[$owner_new]} fleetsem:{many}:" "$T/fake.out"
fs a run --slots 1 --wait 20s after -- true
is "$?" 0 "a new job gets a slot after the move"

kill "$fake"
wait "$fake" 2>/dev/null

# ---- fleetsemd --load-library into every master -------------------------------------
# More masters than the 64 it once loaded (it left the rest without a word,
# and exited 0), on a fake Cluster of their own over the same real node,
# where the agent loaded the library: each master says it is there.
N2=70
many_masters "$T/fake2.out" "$N2"
fake2=$PROXY F2=$SEED
out=$("$FLEETSEMD" --redis "cluster://fleetsem@127.0.0.1:$F2" --redis-password-file "$T/acl.pw" \
        --load-library 2>&1); rc=$?
is "$rc" 0 "fleetsemd --load-library on $N2 masters: exit 0"
is "$(printf '%s\n' "$out" | sed -nE 's/^Redis at 127\.0\.0\.1:([0-9]+): fleetsem library version [0-9]+ is there already.*/\1/p' |
        sort -n | tr '\n' ' ')" \
        "$(awk '$1 == "master" && $2 == 0 { print $3 }' "$T/fake2.out" | sort -n | tr '\n' ' ')" \
        "... and looked at each of the $N2, once"
kill "$fake2"
wait "$fake2" 2>/dev/null
done_testing
