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
. tests/scratch.sh

say() { printf '\033[1m%s\033[0m\n' "$*"; }

scratch_setup demo
say "== Started a private redis-server on $SCRATCH/redis.sock"
for host in web-1 web-2; do
        say "== Starting the agent of host $host (namespace demo-$host)"
        scratch_agent "demo-$host" "$host" --lease-ttl 5s
        tail -n +1 -f "$SCRATCH/agent-$host.log" | sed -u "s/^fleetsemd: /   [agent $host] /" &
        SCRATCH_PIDS+=($!)
done
sleep 0.3       # not synchronisation: the demo's pace, for a reader

say "== 6 jobs on 2 hosts, at most 2 at once fleet-wide: fleetsem run --slots 2 nightly-report -- …"
jobs_pids=()
for i in 1 2 3 4 5 6; do
        host=$([ $((i % 2)) = 1 ] && echo web-1 || echo web-2)
        echo "   job $i starts on $host"
        report='echo "   job '"$i"' on '"$host"': RUNNING with fencing token $FLEETSEM_TOKEN"; sleep 2'  # not synchronisation: the job's run time
        FLEETSEM_NAMESPACE="demo-$host" "$FLEETSEM" run --verbose --slots 2 nightly-report -- sh -c "$report" \
                2>&1 | sed -u "s/^fleetsem: nightly-report: /   job $i on $host: /" &
        jobs_pids+=($!)
        sleep 0.1       # not synchronisation: the demo's pace, for a reader
done
sleep 0.5       # not synchronisation: the demo's pace, for a reader
say "== fleetsem status, while 2 run and 4 wait in line"
FLEETSEM_NAMESPACE=demo-web-1 "$FLEETSEM" status
wait "${jobs_pids[@]}"
say "== All 6 jobs ran, 2 at a time, in order of arrival with rising tokens. Status now:"
FLEETSEM_NAMESPACE=demo-web-1 "$FLEETSEM" status
