# Redis Cluster as a fleet runs it, small: three masters (no replicas) on
# loopback TCP ports of their own, all in the test's temporary directory.
# Source after lib.sh.
#   cluster_start             starts them, creates the cluster, waits for
#                             cluster_state:ok on every node; sets C_PORTS
#                             (the masters' ports), C_ID[PORT] (their node
#                             ids) and CLUSTER_URL; CLUSTER_NEW=1: each
#                             hash slot's census not seeded
#   ccli PORT ARGS...         redis-cli to that one node (no -c: no redirects)
#   cluster_one_node          one master owning every hash slot, port in P
#   cluster_keyslot KEY       the hash slot of KEY
#   cluster_owner SLOT        the port of the master that says it owns SLOT
#   cluster_slots PORT        how many slots that master says it owns
#   cluster_names N PREFIX    N names per master: sets C_NAMES[PORT] ("n1 n2 ..."),
#                             names PREFIX0, PREFIX1, ... by their {NAME} slot
#   name_keys PORT NAME       the keys of NAME that node stores (SCAN, local)
#   cluster_agent HOST [fleetsemd options...]
#   cluster_agent_conf HOST [fleetsemd options...]   the same, with
#                             "redis = cluster://..." in a configuration file
#   redirects PORT            "MOVED ASK TRYAGAIN ASKING": the redirections
#                             that node answered and the ASKINGs it was sent
declare -A C_ID C_BUS C_NAMES
C_PORTS=()

ccli() { local port=$1; shift; timeout 10 redis-cli -p "$port" "$@"; }

cluster_server() {
        local port=$1 bus; shift
        # The bus port would be PORT + 10000, which may not be free (or
        # exist): one of its own.
        bus=$(free_port)
        C_BUS[$port]=$bus
        mkdir -p "$T/c$port"
        "$REDIS_SERVER" --port "$port" --bind 127.0.0.1 --dir "$T/c$port" \
                --cluster-enabled yes --cluster-config-file "$T/nodes$port.conf" \
                --cluster-port "$bus" --cluster-node-timeout 2000 \
                --save '' --appendonly no --pidfile "$T/c$port/pid" --daemonize yes \
                --logfile "$T/c$port/log" --include "$T/acl.conf" "$@" >/dev/null || bail "redis-server on $port did not start"
        wait_for 10 ccli "$port" ping || bail "redis-server on $port does not answer"
}

cluster_ok() {
        local p
        for p in "${C_PORTS[@]}"; do
                ccli "$p" CLUSTER INFO | grep -q '^cluster_state:ok' || return 1
        done
}

# Every node knows every master's slots as the masters themselves say.
cluster_agrees() {
        local p q want
        for p in "${C_PORTS[@]}"; do
                want=$(ccli "$p" CLUSTER NODES | awk '$3 ~ /myself/ { $1 = $1; print }' | cut -d' ' -f9- | tr -d '\r')
                for q in "${C_PORTS[@]}"; do
                        [ "$(ccli "$q" CLUSTER NODES | awk -v id="${C_ID[$p]}" '$1 == id { $1 = $1; print }' |
                                cut -d' ' -f9- | tr -d '\r')" = "$want" ] || return 1
                done
        done
}

# The nodes run with the shipped ACL (systemd/redis-acl.conf.example, its
# default user left open to the test's own look-ups), and the agents log
# in as its fleetsem user: the Cluster's own commands (CLUSTER SLOTS,
# ASKING, SSUBSCRIBE, SPUBLISH) must be refused them nowhere.
cluster_start() {
        local p
        acl_audit_setup
        C_PORTS=("$(free_port)" "$(free_port)" "$(free_port)")
        for p in "${C_PORTS[@]}"; do cluster_server "$p"; done
        redis-cli --cluster create "${C_PORTS[@]/#/127.0.0.1:}" --cluster-replicas 0 --cluster-yes \
                >"$T/cluster-create.log" 2>&1 || bail "redis-cli --cluster create failed: $(tail -n 3 "$T/cluster-create.log")"
        wait_for 30 cluster_ok || bail "the cluster did not reach cluster_state:ok"
        for p in "${C_PORTS[@]}"; do C_ID[$p]=$(ccli "$p" CLUSTER MYID); done
        wait_for 30 cluster_agrees || bail "the nodes do not agree on the slots"
        CLUSTER_URL="cluster://fleetsem@127.0.0.1:${C_PORTS[0]},127.0.0.1:${C_PORTS[1]},127.0.0.1:${C_PORTS[2]}"
        [ -n "${CLUSTER_NEW:-}" ] || cluster_seed
}

# cluster_one_node: one master that owns every hash slot, in P (it
# announces 127.0.0.1: a node alone knows no address of its own to give in
# CLUSTER SLOTS).
cluster_one_node() {
        acl_audit_setup
        P=$(free_port)
        cluster_server "$P" --cluster-announce-ip 127.0.0.1
        ccli "$P" CLUSTER ADDSLOTSRANGE 0 16383 >/dev/null
        C_PORTS=("$P")
        wait_for 10 cluster_ok || bail "the one-node Cluster did not reach cluster_state:ok"
        cluster_seed
}

cluster_keyslot() { ccli "${C_PORTS[0]}" CLUSTER KEYSLOT "$1"; }

# cluster_seed: every hash slot's census, as an operator seeds a new
# Cluster (fleetsemd(8), SAFETY: What Redis forgets), so that the first use
# of each slot does not wait a lease (tests/slot-tag.py names them).
cluster_seed() {
        local p
        for p in "${C_PORTS[@]}"; do
                own_ranges "$p" | python3 "$(dirname "${BASH_SOURCE[0]}")/slot-tag.py" --census | ccli "$p" >/dev/null
        done
}

# The slot ranges a master's own CLUSTER NODES line gives it ("A-B" or "A";
# "[S->-ID]" / "[S-<-ID]" are open slots, not owned by that alone).
own_ranges() { ccli "$1" CLUSTER NODES | awk '$3 ~ /myself/ { for (i = 9; i <= NF; i++) if ($i !~ /^\[/) print $i }' | tr -d '\r'; }

cluster_owner() {
        local p
        for p in "${C_PORTS[@]}"; do
                own_ranges "$p" | awk -F- -v s="$1" '{ lo = $1; hi = ($2 == "" ? $1 : $2) } s >= lo && s <= hi { f = 1 } END { exit !f }' &&
                        { echo "$p"; return 0; }
        done
        return 1
}

cluster_slots() { own_ranges "$1" | awk -F- '{ n += ($2 == "" ? 1 : $2 - $1 + 1) } END { print n + 0 }'; }

cluster_names() {
        local want=$1 prefix=$2 i=0 p full n name
        for p in "${C_PORTS[@]}"; do C_NAMES[$p]=""; done
        while :; do
                full=1
                for p in "${C_PORTS[@]}"; do
                        n=$(echo "${C_NAMES[$p]}" | wc -w)
                        [ "$n" -lt "$want" ] && full=0
                done
                [ "$full" = 1 ] && return 0
                [ "$i" -gt 1000 ] && bail "no $want names on each master"
                name=$prefix$i
                i=$((i + 1))
                p=$(cluster_owner "$(cluster_keyslot "{$name}")") || bail "nobody owns the slot of $name"
                n=$(echo "${C_NAMES[$p]}" | wc -w)
                [ "$n" -lt "$want" ] && C_NAMES[$p]="${C_NAMES[$p]} $name"
        done
}

# SCAN sees a node's own keys only: no redirects.
name_keys() { ccli "$1" --scan --pattern "fleetsem:{$2}:*" | sort | tr '\n' ' '; }

# cluster_agent HOST [fleetsemd options...]: an agent that finds the
# masters through the nodes of $CLUSTER_URL.
cluster_agent() { local host=$1; shift; run_agent "$host" --redis "$CLUSTER_URL" --redis-password-file "$T/acl.pw" "$@"; }

# cluster_agent_conf HOST [fleetsemd options...]: the same, with the URL
# from a configuration file.
cluster_agent_conf() {
        local host=$1; shift
        printf 'redis = %s\nredis_password_file = %s\n' "$CLUSTER_URL" "$T/acl.pw" >"$T/$host.conf"
        run_agent "$host" -c "$T/$host.conf" "$@"
}

redirects() {
        local info
        info=$(ccli "$1" INFO errorstats; ccli "$1" INFO commandstats)
        printf '%s\n' "$info" | awk -F'[:=,]' '
                $1 == "errorstat_MOVED" { m = $3 } $1 == "errorstat_ASK" { a = $3 }
                $1 == "errorstat_TRYAGAIN" { t = $3 } $1 == "cmdstat_asking" { k = $3 }
                END { print m + 0, a + 0, t + 0, k + 0 }'
}

cluster_cleanup() {
        local f
        for f in "$T"/c*/pid; do [ -f "$f" ] && kill -KILL "$(cat "$f")" 2>/dev/null; done
        cleanup
}
trap cluster_cleanup EXIT
