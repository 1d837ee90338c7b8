#!/bin/bash
# A Cluster whose nodes change address over its life: more distinct
# addresses than the agent's table of masters holds (64) must not stop it
# following the map. The URL names a node of the test's own that answers
# CLUSTER SLOTS with a new, dead address 72 times, then with a real node
# that owns every hash slot; the agent forgets the dead ones as it goes and
# ends up on the real one.
TTL=1s
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-cluster.sh"
N=72

cluster_one_node
F=$(free_port)
python3 "$(dirname "$0")/fake-cluster-node.py" "$F" 127.0.0.1 "$P" "$N" >"$T/fake.out" 2>&1 &
fake=$!
wait_for 5 grep -q listening "$T/fake.out" || bail "the fake node did not start"
CLUSTER_URL="cluster://fleetsem@127.0.0.1:$F"
cluster_agent a

check "the fake node gave $N dead addresses, then the real node's" \
        wait_for 120 grep -q "^answered $((N + 1)) $P\$" "$T/fake.out"
is "$(awk -v n="$N" '$1 == "answered" && $2 <= n { print $3 }' "$T/fake.out" | sort -u | wc -l)" "$N" \
        "... $N distinct addresses, more than the 64 the agent holds at once"
check "the agent follows the map to the real node" \
        wait_for 20 sh -c "FLEETSEM_NAMESPACE=$NSBASE-a $FLEETSEM metrics | grep -qx 'fleetsem_redis_up 1'"
fs a run --slots 1 moved -- true
is "$?" 0 "a job gets a slot there"
is "$(ccli "$P" EXISTS 'fleetsem:{moved}:token')" 1 "... in the real node's keys"
forgot=$(grep -c "forgetting .*, which owns no hash slot" "$T/agent-a.log")
check "the agent forgot dead nodes to make room ($forgot times)" [ "$forgot" -ge $((N - 64)) ]
check "... and never gave up on a map for want of room" sh -c "grep -q 'forgetting' '$T/agent-a.log' && ! grep -q 'unusable answer to CLUSTER SLOTS' '$T/agent-a.log'"

kill "$fake"
wait "$fake" 2>/dev/null
done_testing
