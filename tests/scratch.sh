# A private redis-server and agents in a temporary directory, torn down on
# exit: for the demo and the benchmark. Source it after building.
#   scratch_setup NAME            starts redis-server in $SCRATCH
#   scratch_agent NAMESPACE HOST  starts an agent; it logs to $SCRATCH/agent-HOST.log
SCRATCH_PIDS=()

scratch_cleanup() {
        local p
        for p in "${SCRATCH_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
        redis-cli -s "$SCRATCH/redis.sock" shutdown nosave >/dev/null 2>&1 || true
        wait 2>/dev/null || true
        rm -rf "$SCRATCH"
}

scratch_setup() {
        SCRATCH=$(mktemp -d "/tmp/fleetsem-$1.XXXXXX")
        trap scratch_cleanup EXIT
        redis-server --port 0 --unixsocket "$SCRATCH/redis.sock" --dir "$SCRATCH" --save '' --appendonly no \
                --daemonize yes --logfile "$SCRATCH/redis.log" >/dev/null
        until redis-cli -s "$SCRATCH/redis.sock" ping >/dev/null 2>&1; do sleep 0.05; done
        # A new Redis: nobody held a slot before it, so no grace is needed
        # for holders from before (see fleetsemd(8), "Redis restarts").
        redis-cli -s "$SCRATCH/redis.sock" SET fleetsem:epoch "$(printf '%032x' $$) 0" NX >/dev/null
        redis-cli -s "$SCRATCH/redis.sock" ZADD fleetsem:census NX -1 . >/dev/null
}

scratch_agent() {
        local ns=$1 host=$2; shift 2
        build/src/agent/fleetsemd --redis "unix:$SCRATCH/redis.sock" --namespace "$ns" --host-id "$host" "$@" \
                >>"$SCRATCH/agent-$host.log" 2>&1 &
        SCRATCH_PIDS+=($!)
        until grep -q "@$ns/agent" /proc/net/unix; do sleep 0.05; done
}
