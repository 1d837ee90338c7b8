#!/bin/bash
# A Cluster node's word is not enough to get the password: a node outside
# cluster_allow (by default the seed nodes' networks) is never connected
# to. The URL names a node of the test's own that gives every hash slot to
# a listener on 127.1.0.1 (another network than the seed's 127.0.0.1) 5
# times, then to the real node. The agent refuses the foreign address,
# says so in its log and its systemd status, and serves from the real node;
# the listener hears nothing. An agent whose cluster_allow takes in
# 127.0.0.0/8 does connect, and the listener gets its AUTH: the check is
# what kept it out. fleetsemd --load-library makes the same check (peers.c)
# and refuses such a map.
TTL=1s
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-cluster.sh"
N=5

cluster_one_node
Q=$(free_port)
FAKE_BIND=127.1.0.1 python3 "$(dirname "$0")/fake-cluster-node.py" "$Q" 127.1.0.1 "$Q" 0 >"$T/foreign.out" 2>&1 &
foreign=$!
wait_for 30 grep -q listening "$T/foreign.out" || bail "the foreign listener did not start"
# url_node NAME: a seed node of the test's own that names the foreign
# address N times; sets URL_PORT.
url_node() {
        URL_PORT=$(free_port)
        FAKE_NAMES="127.1.0.1:$Q" python3 "$(dirname "$0")/fake-cluster-node.py" "$URL_PORT" 127.0.0.1 "$P" "$N" \
                >"$T/$1.out" 2>&1 &
        FAKES+=($!)
        wait_for 30 grep -q listening "$T/$1.out" || bail "the fake seed node did not start"
}
FAKES=()

python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
with open(sys.argv[2], "a") as out:
    while True:
        out.write(s.recv(4096).decode().replace("\n", " ") + "\n")
        out.flush()
' "$T/notify" "$T/notify.log" &
FAKES+=($!)
wait_for 5 test -S "$T/notify"

# The operator's tools check the map's masters as the agent does: a seed
# that names the foreign address gets --load-library refused whole, with
# the reason, and the foreign listener hears nothing.
url_node seed-t
printf 'redis = cluster://fleetsem@127.0.0.1:%s\nredis_password_file = %s\n' "$URL_PORT" "$T/acl.pw" >"$T/tool.conf"
out=$("$FLEETSEMD" -c "$T/tool.conf" --load-library 2>&1); rc=$?
is "$rc" 1 "fleetsemd --load-library refuses a map that names a master outside cluster_allow: exit 1"
like "$out" "names master 127\.1\.0\.1:$Q, which is outside cluster_allow .*nothing done, nothing sent to it" \
        "... saying which master and why"
log_lacks "$T/foreign.out" '^got' listening "... and the foreign address got no connection from it: no AUTH, no command"

url_node seed-a
CLUSTER_URL="cluster://fleetsem@127.0.0.1:$URL_PORT"
NOTIFY_SOCKET=$T/notify cluster_agent a
check "the seed node named the foreign address $N times, then the real node" \
        wait_for 60 grep -q "^answered $((N + 1)) $P\$" "$T/seed-a.out"
check "the agent serves from the real node" \
        wait_for 20 sh -c "FLEETSEM_NAMESPACE=$NSBASE-a $FLEETSEM metrics | grep -qx 'fleetsem_redis_up 1'"
fs a run --slots 1 allowed -- true
is "$?" 0 "a job gets a slot there"
log_lacks "$T/foreign.out" '^got' listening "the foreign address got no connection: no AUTH, no command"
like "$(cat "$T/agent-a.log")" "not connecting to 127\.1\.0\.1:$Q, which a node named: it is outside cluster_allow" \
        "the agent's log says what it refused"
check "... and so does its status for systemd" grep -q "refused 127\.1\.0\.1:$Q (not in cluster_allow)" "$T/notify.log"

# The same with cluster_allow taking in the foreign network.
url_node seed-b
printf 'redis = cluster://fleetsem@127.0.0.1:%s\nredis_password_file = %s\ncluster_allow = 127.0.0.0/8\n' \
        "$URL_PORT" "$T/acl.pw" >"$T/b.conf"
run_agent b -c "$T/b.conf"
check "with cluster_allow = 127.0.0.0/8 the agent connects to the foreign address, and sends it AUTH" \
        wait_for 30 grep -q '^got AUTH' "$T/foreign.out"
check "... and still ends on the real node" wait_for 60 grep -q "^answered $((N + 1)) $P\$" "$T/seed-b.out"

printf 'redis = redis://127.0.0.1\ncluster_allow = 10.0.0.0/8\n' >"$T/plain.conf"
"$FLEETSEMD" --check-config -c "$T/plain.conf" >"$T/check.out" 2>&1
is "$?" 1 "cluster_allow without a cluster:// URL is a configuration error"
like "$(cat "$T/check.out")" "cluster_allow is set, but redis is not a cluster:// URL" "... saying why"
printf 'redis = cluster://127.0.0.1:%s\ncluster_allow = 10.0.0.0/33\n' "$P" >"$T/bad.conf"
"$FLEETSEMD" --check-config -c "$T/bad.conf" >"$T/check.out" 2>&1
is "$?" 1 "a network that is not one is refused"
like "$(cat "$T/check.out")" "cluster_allow: expected networks such as 10.1.0.0/16" "... saying what is expected"

kill "$foreign" "${FAKES[@]}"
wait "$foreign" "${FAKES[@]}" 2>/dev/null
done_testing
