#!/bin/bash
# The demo: builds fleetsem, starts a private redis-server and two agents
# (two "hosts") in a temporary directory, and runs 6 jobs that contend for
# 2 fleet-wide slots, so you see them queue, get their slots in order of
# arrival with rising fencing tokens, and release. Then tears it all down.
#   bash tests/demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. tests/deps.sh
ensure_deps
[ -f build/build.ninja ] || meson setup build >/dev/null
meson compile -C build >/dev/null

FLEETSEM=$PWD/build/src/cli/fleetsem
FLEETSEMD=$PWD/build/src/agent/fleetsemd
T=$(mktemp -d /tmp/fleetsem-demo.XXXXXX)
agents=()
cleanup() {
        for p in "${agents[@]}"; do kill "$p" 2>/dev/null || true; done
        redis-cli -s "$T/redis.sock" shutdown nosave >/dev/null 2>&1 || true
        wait 2>/dev/null || true
        rm -rf "$T"
}
trap cleanup EXIT

say() { printf '\033[1m%s\033[0m\n' "$*"; }

say "== Starting a private redis-server on $T/redis.sock"
redis-server --port 0 --unixsocket "$T/redis.sock" --dir "$T" --save '' --appendonly no \
        --daemonize yes --logfile "$T/redis.log" >/dev/null
until redis-cli -s "$T/redis.sock" ping >/dev/null 2>&1; do sleep 0.05; done

for host in web-1 web-2; do
        say "== Starting the agent of host $host (namespace demo-$host)"
        "$FLEETSEMD" --redis "unix:$T/redis.sock" --namespace "demo-$host" --host-id "$host" \
                --lease-ttl 5s 2>&1 | sed -u "s/^fleetsemd: /   [agent $host] /" &
        agents+=($!)
        until grep -q "@demo-$host/agent" /proc/net/unix; do sleep 0.05; done
done
sleep 0.3

say "== 6 jobs on 2 hosts, at most 2 at once fleet-wide: fleetsem run --slots 2 nightly-report -- …"
jobs_pids=()
for i in 1 2 3 4 5 6; do
        host=$([ $((i % 2)) = 1 ] && echo web-1 || echo web-2)
        echo "   job $i starts on $host"
        FLEETSEM_NAMESPACE="demo-$host" "$FLEETSEM" run --verbose --slots 2 nightly-report -- \
                sh -c 'echo "   job '"$i"' on '"$host"': RUNNING with fencing token $FLEETSEM_TOKEN"; sleep 2' \
                2>&1 | sed -u "s/^fleetsem: nightly-report: /   job $i on $host: /" &
        jobs_pids+=($!)
        sleep 0.1
done
sleep 0.5
say "== fleetsem status, while 2 run and 4 wait in line"
FLEETSEM_NAMESPACE=demo-web-1 "$FLEETSEM" status
wait "${jobs_pids[@]}"
say "== All 6 jobs ran, 2 at a time, in order of arrival with rising tokens. Status now:"
FLEETSEM_NAMESPACE=demo-web-1 "$FLEETSEM" status
