#!/bin/bash
# Runs the benchmark: bash bench/run.sh [RESULTS.json]
# Starts its own redis-server (no persistence) and three agents in a
# temporary directory, measures the floors and fleetsem in the same run,
# prints a table and writes JSON (default: bench/results.json).
set -euo pipefail
cd "$(dirname "$0")/.."
. tests/deps.sh
ensure_deps
out=${1:-bench/results.json}
[ -f build/build.ninja ] || meson setup build >/dev/null
meson compile -C build >/dev/null

. tests/scratch.sh
scratch_setup bench
for h in a b c; do
        scratch_agent "bench$$-$h" "bench-$h" --log-level warning
done

echo "# $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo), $(uname -sr), $(redis-server --version | awk '{print $1, $2, $3}')"
FLEETSEMD=$PWD/build/src/agent/fleetsemd build/bench/fleetsem-bench "$SCRATCH/redis.sock" "$PWD/build/src/cli/fleetsem" "bench$$-a" "bench$$-b" "bench$$-c" | tee "$SCRATCH/out"
{
        echo '{"machine":"'"$(nproc) cores, $(uname -sr)"'","results":['
        grep '^@json ' "$SCRATCH/out" | sed 's/^@json //' | paste -sd, -
        echo ']}'
} >"$out"
echo "# results written to $out"
