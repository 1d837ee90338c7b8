#!/bin/bash
# Sentinel and Cluster over TLS, on a build with TLS (hiredis_ssl, as on
# Debian 13): every connection the agent opens, to each Sentinel, to the
# master, to each Cluster node, is TLS with the server's certificate
# checked (here against tls_server_name, since the Sentinels and the nodes
# name each other by address); grants work through each, and a
# certificate for another name is refused.
. "$(dirname "$0")/lib.sh"
require openssl
if [[ $("$FLEETSEMD" --version) != *"TLS to Redis: yes"* ]]; then
        # A skip even in CI: tests/debian13.sh runs it on a build with TLS.
        skip_build "this build has no TLS to Redis (hiredis_ssl; Debian 12's hiredis 0.14 has none)"
fi
tls_cleanup() {
        local f
        for f in "$T"/*.pid; do [ -f "$f" ] && kill -KILL "$(cat "$f")" 2>/dev/null; done
        cleanup
}
trap tls_cleanup EXIT

make_cert ca "fleetsem test CA" && make_cert server localhost ca || bail "openssl could not make the certificates"
TLS=(--tls-cert-file "$T/server.crt" --tls-key-file "$T/server.key" --tls-ca-cert-file "$T/ca.crt"
     --tls-auth-clients no)
tcli() { local port=$1; shift; timeout 10 redis-cli --tls --cacert "$T/ca.crt" -p "$port" "$@"; }
# server NAME PORT ARGS...: a Redis (or Valkey) on a TLS port only.
server() {
        local name=$1 port=$2; shift 2
        mkdir -p "$T/$name"
        "$REDIS_SERVER" --port 0 --tls-port "$port" "${TLS[@]}" --bind 127.0.0.1 --dir "$T/$name" --save '' \
                --appendonly no --daemonize yes --pidfile "$T/$name.pid" --logfile "$T/$name.log" "$@" >/dev/null ||
                bail "$REDIS_SERVER $name did not start"
        wait_for 10 tcli "$port" ping || bail "$name does not answer over TLS"
}
conf() {            # FILE KEY=VALUE...
        local f=$T/$1.conf; shift
        printf '%s\n' "$@" | sed 's/=/ = /' >"$f"
        echo "$f"
}

# ---- Sentinel: a master, a replica and three Sentinels, all on TLS only -------------
M=$(free_port) R=$(free_port)
server master "$M" --tls-replication yes
server replica "$R" --tls-replication yes --replicaof 127.0.0.1 "$M"
S=("$(free_port)" "$(free_port)" "$(free_port)")
for s in "${S[@]}"; do
        cat >"$T/sentinel-$s.conf" <<EOF
port 0
tls-port $s
tls-cert-file $T/server.crt
tls-key-file $T/server.key
tls-ca-cert-file $T/ca.crt
tls-auth-clients no
tls-replication yes
bind 127.0.0.1
daemonize yes
pidfile $T/sentinel-$s.pid
logfile $T/sentinel-$s.log
dir $T
sentinel monitor fsm 127.0.0.1 $M 2
sentinel down-after-milliseconds fsm 1000
EOF
        "$REDIS_SENTINEL" "$T/sentinel-$s.conf" >/dev/null || bail "Sentinel $s did not start"
done
sees_replica() { tcli "${S[0]}" SENTINEL replicas fsm | grep -qx "$R"; }
check "the Sentinels see the master and its replica over TLS" wait_for 30 sees_replica
URL="sentinel+tls://127.0.0.1:${S[0]},127.0.0.1:${S[1]},127.0.0.1:${S[2]}/fsm"
run_agent a --config "$(conf named tls_ca_file="$T/ca.crt" tls_server_name=localhost)" --redis "$URL"
check "sentinel+tls: the agent finds the master through the Sentinels, over TLS" wait_for 15 redis_state_is a up
fs a run --slots 1 --wait 20s tls-sentinel -- true
is "$?" 0 "sentinel+tls: a slot is granted"
is "$(tcli "$M" EXISTS 'fleetsem:{tls-sentinel}:clock')" 1 "sentinel+tls: ... in the master's keys"
run_agent b --config "$(conf unnamed tls_ca_file="$T/ca.crt")" --redis "$URL"
check "sentinel+tls: Sentinels by address, certificates for 'localhost': refused, and the log says why" \
        wait_for 15 grep -q "Sentinel 127.0.0.1:[0-9]* does not name master fsm: TLS: the server's certificate does not verify: IP address mismatch" "$T/agent-b.log"
is "$(redis_state_is b down && echo down)" down "sentinel+tls: ... Redis is down for that agent"
sed "s/^/# agent b: /" "$T/agent-b.log" | head -n 8

# ---- Cluster: three masters, clients and the bus on TLS ---------------------------
C=("$(free_port)" "$(free_port)" "$(free_port)")
for p in "${C[@]}"; do
        server "node-$p" "$p" --tls-cluster yes --tls-replication yes --cluster-enabled yes \
                --cluster-config-file "$T/nodes-$p.conf" --cluster-port "$(free_port)" --cluster-node-timeout 2000
done
redis-cli --tls --cacert "$T/ca.crt" --cluster create "${C[@]/#/127.0.0.1:}" --cluster-replicas 0 --cluster-yes \
        >"$T/cluster-create.log" 2>&1 || bail "redis-cli --cluster create failed: $(tail -n 3 "$T/cluster-create.log")"
cluster_ok() { local p; for p in "${C[@]}"; do tcli "$p" CLUSTER INFO | grep -q '^cluster_state:ok' || return 1; done; }
check "the Cluster is up over TLS" wait_for 30 cluster_ok
run_agent c --config "$(conf cnamed tls_ca_file="$T/ca.crt" tls_server_name=localhost)" \
        --redis "cluster+tls://127.0.0.1:${C[0]}"
check "cluster+tls: the agent reads the map over TLS" wait_for 15 redis_state_is c up
ok=0
for i in $(seq 1 30); do fs c run --slots 1 --wait 20s "tls-cluster-$i" -- true && ok=$((ok + 1)); done
is "$ok" 30 "cluster+tls: 30 names, each granted on the master of its hash slot"
masters=0
for p in "${C[@]}"; do [ "$(tcli "$p" --scan --pattern 'fleetsem:{tls-cluster-*}:clock' | grep -c .)" -gt 0 ] &&
        masters=$((masters + 1)); done
is "$masters" 3 "cluster+tls: ... over all 3 masters, each reached over TLS from the map (no cluster_allow needed)"
done_testing
