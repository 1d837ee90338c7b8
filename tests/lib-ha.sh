# Redis as a fleet runs it: a master, a replica and three Sentinels, on
# loopback TCP ports of their own, all in the test's temporary directory.
# Source after lib.sh.
#   ha_start                starts them and waits until the Sentinels see both
#                           (HA_NEW=1: holding no key of fleetsem's)
#   ha_master_port          the port of the master the Sentinels name now
#   ha_settled              waits until the Sentinels agree and the replica is in sync
#   ha_kill PORT / ha_restart PORT
HA_MASTER=fsm
HA_DOWN_AFTER=${HA_DOWN_AFTER:-1000}
HA_SERVER_ARGS=()       # given to every redis-server ha_server starts

ha_server() {
        local port=$1; shift
        mkdir -p "$T/r$port"
        "$REDIS_SERVER" --port "$port" --bind 127.0.0.1 --dir "$T/r$port" --save '' --appendonly no \
                --pidfile "$T/r$port/pid" --daemonize yes --logfile "$T/r$port/log" "${HA_SERVER_ARGS[@]}" "$@" >/dev/null ||
                bail "redis-server on $port did not start"
        wait_for 10 redis-cli -p "$port" ping || bail "redis-server on $port does not answer"
}

ha_sentinel() {
        local port=$1 conf=$T/s$1.conf
        cat >"$conf" <<EOF
port $port
bind 127.0.0.1
daemonize yes
pidfile $T/s$port.pid
logfile $T/s$port.log
dir $T
sentinel monitor $HA_MASTER 127.0.0.1 $HA_M 2
sentinel down-after-milliseconds $HA_MASTER $HA_DOWN_AFTER
sentinel failover-timeout $HA_MASTER 4000
sentinel parallel-syncs $HA_MASTER 1
EOF
        if command -v "$REDIS_SENTINEL" >/dev/null; then "$REDIS_SENTINEL" "$conf" >/dev/null
        else "$REDIS_SERVER" "$conf" --sentinel >/dev/null; fi || bail "Sentinel on $port did not start"
        wait_for 10 redis-cli -p "$port" ping || bail "Sentinel on $port does not answer"
}

ha_start() {
        HA_M=$(free_port); HA_R=$(free_port)
        HA_S=("$(free_port)" "$(free_port)" "$(free_port)")
        ha_server "$HA_M"
        ha_server "$HA_R" --replicaof 127.0.0.1 "$HA_M"
        wait_for 10 sh -c "redis-cli -p $HA_R INFO replication | grep -q 'master_link_status:up'" ||
                bail "the replica did not sync"
        for p in "${HA_S[@]}"; do ha_sentinel "$p"; done
        wait_for 20 sh -c "for p in ${HA_S[*]}; do redis-cli -p \$p SENTINEL replicas $HA_MASTER | grep -q $HA_R || exit 1; done" ||
                bail "the Sentinels do not see the replica"
        # A new Redis: nobody held anything before it (see start_redis),
        # unless HA_NEW says the test wants it as a first use finds it.
        if [ -z "${HA_NEW:-}" ]; then
                redis-cli -p "$HA_M" SET fleetsem:epoch "$(printf '%032x' $$) 0 $(ha_master_id "$HA_M")" >/dev/null
                redis-cli -p "$HA_M" ZADD fleetsem:census -1 . >/dev/null
        fi
        HA_URL="sentinel://127.0.0.1:${HA_S[0]},127.0.0.1:${HA_S[1]},127.0.0.1:${HA_S[2]}/$HA_MASTER"
}

# ha_master_id PORT: how the epoch names a master: its run id and replication id.
ha_master_id() {
        redis-cli -p "$1" INFO default | tr -d '\r' |
                awk -F: '$1 == "run_id" { r = $2 } $1 == "master_replid" { m = $2 } END { print r m }'
}
ha_master_port() { timeout 5 redis-cli -p "${HA_S[0]}" SENTINEL get-master-addr-by-name "$HA_MASTER" | sed -n 2p; }

# ha_agree: true when all three Sentinels name one master, which says it
# is one, and the other server replicates from it with its link up; sets
# HA_NOW_M and HA_NOW_R. ha_settled waits up to 30 s for that: Sentinels
# that stall for longer than down-after-milliseconds on a loaded machine
# fail over again, even to a replica that has not synced yet, and take
# seconds to agree.
ha_agree() {
        local m r s info

        m=$(ha_master_port)
        [ -n "$m" ] || return 1
        for s in "${HA_S[@]}"; do
                [ "$(timeout 5 redis-cli -p "$s" SENTINEL get-master-addr-by-name "$HA_MASTER" | sed -n 2p)" = "$m" ] || return 1
        done
        if [ "$m" = "$HA_M" ]; then r=$HA_R; else r=$HA_M; fi
        info=$(timeout 5 redis-cli -p "$r" INFO replication | tr -d '\r')
        [ "$(timeout 5 redis-cli -p "$m" ROLE | head -n 1)" = master ] &&
                grep -qx "master_port:$m" <<<"$info" && grep -qx 'master_link_status:up' <<<"$info" || return 1
        HA_NOW_M=$m HA_NOW_R=$r
}
ha_settled() { wait_for 30 ha_agree; }
ha_kill() {
        kill -KILL "$(cat "$T/r$1/pid")" || bail "no redis-server on port $1 to kill"
        wait_for 10 sh -c "! redis-cli -p $1 ping" || bail "the redis-server on port $1 still answers after SIGKILL"
}

# ha_agent HOST [fleetsemd options...]: an agent that finds Redis through the Sentinels.
ha_agent() { local host=$1; shift; run_agent "$host" --redis "$HA_URL" "$@"; }

# redis_now HOST: the Redis HOST's agent says it uses (fleetsem status --json).
redis_now() { fs "$1" status --json | sed -n 's/^{"now_ms":[0-9]*,"redis":"\([^"]*\)".*/\1/p'; }
redis_now_is() { [ "$(redis_now "$1")" = "$2" ]; }

ha_cleanup() {
        local f
        for f in "$T"/r*/pid "$T"/s*.pid; do [ -f "$f" ] && kill -KILL "$(cat "$f")" 2>/dev/null; done
        cleanup
}
trap ha_cleanup EXIT
