#!/bin/bash
# fleetsem redis-init on a new Redis Cluster of three masters: each master
# looked at (SCAN is a node's own), a key of fleetsem's on any one of them
# refuses the whole Cluster with nothing written on any; else each master
# gets its epoch in the first hash slot it owns, naming it by its run id
# and replication id as the agents' epoch does, and each hash slot its
# census, so that the first agent grants at once on every master.
TTL=15s
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-cluster.sh"
[ "$(id -u)" = 0 ] || skip_all "fleetsem redis-init runs as root only"

CLUSTER_NEW=1 cluster_start
# The test's own look-ups are the default user's; so is redis-init's here
# (the shipped ACL's agent user may not SCAN).
printf 'redis = cluster://127.0.0.1:%s,127.0.0.1:%s\nlease_ttl = %s\n' "${C_PORTS[0]}" "${C_PORTS[1]}" "$TTL" \
        >"$T/fleetsem.conf"
init() { "$FLEETSEM" redis-init --config "$T/fleetsem.conf"; }
sizes() { local p; for p in "${C_PORTS[@]}"; do printf '%s ' "$(ccli "$p" DBSIZE)"; done; }
# master_id PORT: run id and replication id, as the epoch names a master.
master_id() {
        ccli "$1" INFO default | tr -d '\r' |
                awk -F: '$1 == "run_id" { r = $2 } $1 == "master_replid" { m = $2 } END { print r m }'
}
first_slot() { own_ranges "$1" | sed 's/-.*//' | sort -n | head -n 1; }

cluster_names 1 n
last=${C_PORTS[2]}
name=$(echo ${C_NAMES[$last]})
ccli "$last" ZADD "fleetsem:{$name}:holders" 99999999999999 0123456789abcdef0123456789abcdef >/dev/null
out=$(init 2>&1)
is "$?" 65 "a key of fleetsem's on the third master (not in the URL) refuses the Cluster (65)"
like "$out" "Redis at 127\.0\.0\.1:$last holds fleetsem's keys \(fleetsem:\{$name\}:holders\)" "... naming the master and the key"
is "$(sizes)" "0 0 1 " "... and nothing is written on any master"
ccli "$last" DEL "fleetsem:{$name}:holders" >/dev/null

out=$(init 2>&1)
is "$?" 0 "a Cluster with no key of fleetsem's is declared empty (0)"
for p in "${C_PORTS[@]}"; do
        tag=$(python3 "$(dirname "$0")/slot-tag.py" "$(first_slot "$p")")
        like "$out" "Redis at 127\.0\.0\.1:$p declared empty: it held no fleetsem key; fleetsem:epoch:\{$tag\} \(naming this master\) and the census of each of its $(cluster_slots "$p") hash slots written" \
                "master $p: said"
        like "$(ccli "$p" GET "fleetsem:epoch:{$tag}")" "^[0-9a-f]{32} 0 $(master_id "$p")\$" \
                "... its epoch in its first hash slot, naming it, its grace long over"
        is "$(ccli "$p" DBSIZE)" "$(( $(cluster_slots "$p") + 1 ))" "... and a census a hash slot it owns, nothing else"
done
is "$(ccli "$last" ZRANGE "fleetsem:census:{$(python3 "$(dirname "$0")/slot-tag.py" "$(cluster_keyslot "{$name}")")}" 0 -1 WITHSCORES | tr '\n' ' ')" \
        ". -1 " "a census holds its mark alone, made long ago"
before=$(sizes)
out=$(init 2>&1)
is "$?" 0 "run again: 0"
like "$out" "Redis at 127\.0\.0\.1:$last is declared empty already" "... saying so"
is "$(sizes)" "$before" "... nothing written"

# The first agent grants at once on every master.
cluster_names 1 m
cluster_agent a
for p in "${C_PORTS[@]}"; do
        n=$(echo ${C_NAMES[$p]})
        out=$(fs a run --slots 1 --no-wait "$n" -- echo ran 2>&1)
        is "$?:$out" "0:ran" "a first request on master $p's name, without waiting, is granted at once"
done
agent_lacks a 'No slot is granted through Redis' "the agent logs no grace"

out=$(init 2>&1)
is "$?" 65 "in use now: refused (65)"

done_testing
