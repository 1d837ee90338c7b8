#!/bin/bash
# Runs the benchmark: bash bench/run.sh [RESULTS.json]
# Starts its own redis-server (no persistence) and three agents in a
# temporary directory, measures the floors and fleetsem in the same run,
# prints a table and writes JSON (default: bench/results.json).
# BENCH_ONLY=AD runs the floors and the scenarios named (A to H) only, L the
# floors alone; G (100 agents on one Redis) takes BENCH_G_AGENTS and
# BENCH_G_SECONDS, H (the agent under a local flood, as root) BENCH_H_SECONDS
# a phase; BENCH_SATURATE_MS shortens the saturated floors (5 s).
set -euo pipefail
cd "$(dirname "$0")/.."
. tests/deps.sh
ensure_deps "${FLEETSEM_BENCH_DEPS[@]}"
out=${1:-bench/results.json}
[ -f build/build.ninja ] || meson setup build >/dev/null
meson compile -C build >/dev/null

# G runs up to 1,000 agents, each with its connections to Redis and the
# benchmark's anchors: Redis and the benchmark need more than 1,024 files.
ulimit -n "$(ulimit -Hn)"
. tests/scratch.sh
scratch_setup bench
for h in a b c; do
        scratch_agent "bench$$-$h" "bench-$h" --log-level warning
done

if [ -n "${BENCH_B_VS:-}" ]; then
        "$BENCH_B_VS/src/agent/fleetsemd" --redis "unix:$SCRATCH/redis.sock" --namespace "bench$$-vs" --host-id bench-vs \
                --log-level warning >>"$SCRATCH/agent-vs.log" 2>&1 &
        SCRATCH_PIDS+=($!)
        until grep -q "@bench$$-vs/agent" /proc/net/unix; do sleep 0.05; done
        export BENCH_B_VS_CLI=$BENCH_B_VS/src/cli/fleetsem BENCH_B_VS_NS=bench$$-vs
fi

# The peer: etcd on loopback ports of its own, data in the scratch directory.
etcd_args=()
if command -v etcd >/dev/null && command -v etcdctl >/dev/null; then
        etcd --data-dir "$SCRATCH/etcd" --listen-client-urls http://127.0.0.1:23790 \
                --advertise-client-urls http://127.0.0.1:23790 --listen-peer-urls http://127.0.0.1:23800 \
                --initial-advertise-peer-urls http://127.0.0.1:23800 \
                --initial-cluster default=http://127.0.0.1:23800 >"$SCRATCH/etcd.log" 2>&1 &
        SCRATCH_PIDS+=($!)
        until ETCDCTL_API=3 etcdctl --endpoints=127.0.0.1:23790 endpoint health >/dev/null 2>&1; do sleep 0.1; done
        export ETCDCTL_API=3 ETCD_ENDPOINTS_ARG=--endpoints=127.0.0.1:23790
else
        echo "# etcd-server/etcd-client not installed: the etcd peer is left out"
fi

echo "# $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo), $(uname -sr), $(redis-server --version | awk '{print $1, $2, $3}')"
FLEETSEMD=$PWD/build/src/agent/fleetsemd BENCH_ATTACK=$PWD/tests/attack.py build/bench/fleetsem-bench "$SCRATCH/redis.sock" "$PWD/build/src/cli/fleetsem" "bench$$-a" "bench$$-b" "bench$$-c" | tee "$SCRATCH/out"
{
        echo '{"machine":"'"$(nproc) cores, $(uname -sr)"'","results":['
        grep '^@json ' "$SCRATCH/out" | sed 's/^@json //' | paste -sd, -
        echo ']}'
} >"$out"
echo "# results written to $out"
