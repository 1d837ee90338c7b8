#!/bin/bash
# A Cluster whose masters change address over its life: many distinct
# addresses in turn must not stop the agent following the map, and a
# master the map no longer names is let go: its
# connections closed, its place freed. The URL names a node of the test's
# own that answers CLUSTER SLOTS with a new master 72 times, each a live
# node of its own (it takes the agent's set-up and idles, and answers
# CLUSTER SLOTS the same way), then with a real node that owns every hash
# slot; the agent follows each map and ends up on the real node.
TTL=1s
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-cluster.sh"
N=72

cluster_one_node
F=$(free_port)
FAKE_LIVE=1 FAKE_PASSWORD_FILE=$T/acl.pw python3 "$(dirname "$0")/fake-cluster-node.py" "$F" 127.0.0.1 "$P" "$N" >"$T/fake.out" 2>&1 &
fake=$!
wait_for 30 grep -q listening "$T/fake.out" || bail "the fake node did not start"
CLUSTER_URL="cluster://fleetsem@127.0.0.1:$F"
cluster_agent a

check "the fake nodes gave $N masters, then the real node" \
        wait_for 120 grep -q "^answered $((N + 1)) $P\$" "$T/fake.out"
is "$(awk -v n="$N" '$1 == "answered" && $2 <= n { print $3 }' "$T/fake.out" | sort -u | wc -l)" "$N" \
        "... $N distinct addresses, one a map"
check "the agent follows the map to the real node" \
        wait_for 20 sh -c "FLEETSEM_NAMESPACE=$NSBASE-a $FLEETSEM metrics | grep -qx 'fleetsem_redis_up 1'"
fs a run --slots 1 moved -- true
is "$?" 0 "a job gets a slot there"
is "$(ccli "$P" EXISTS 'fleetsem:{moved}:clock')" 1 "... in the real node's keys"

# Each master the agent connected to: as many connections closed as made.
open_to() { awk '$1 == "accepted" { n[$2]++ } $1 == "closed" { n[$2]-- } END { for (p in n) if (n[p]) print p }' \
        "$T/fake.out" | sort -n | tr '\n' ' '; }
reached=$(awk '$1 == "accepted" { print $2 }' "$T/fake.out" | sort -u | wc -l)
check "the agent connected to the masters the maps named ($reached of $N)" [ "$reached" -ge $((N / 2)) ]
none_open() { [ -z "$(open_to)" ]; }
# headroom: closed within a second or two; once over 10 s under the
# sanitizers beside other heavy work, so 30 s
check "... and closed every connection to those the map no longer names" wait_for 30 none_open
is "$(open_to)" "" "no connection to a master of an old map is left open"
is "$(grep -c 'no master of the map any more' "$T/agent-a.log")" "$(awk '$1 == "answered" { n++ } END { print n - 1 }' \
        "$T/fake.out")" "the agent let go of one master per map that moved (as the journal says)"
agent_lacks a 'unusable answer to CLUSTER SLOTS' "... and never gave up on a map for want of room"

kill "$fake"
wait "$fake" 2>/dev/null
done_testing
