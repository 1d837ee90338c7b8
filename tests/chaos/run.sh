#!/bin/bash
# The fault harness (see README.md here): hosts, Redis with a replica and
# three Sentinels, and a fenced resource in network namespaces of their own;
# jobs under `fleetsem run`; a nemesis injecting faults from a seed; then
# the checker's report, also written as JSON.
#   bash tests/chaos/run.sh --minutes M --seed S [--report FILE] [--ttl SECONDS]
#        [--workers N] [--ignore-pct P] [--long-pct P] [--kinds KIND,...] [--weights KIND=N,...] [--builddir DIR] [--keep]
# Root only (namespaces, nftables, cgroups). Exit 0 when every check passed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
minutes= seed= report=$here/report.json builddir=$top/build keep= pass=()
while [ $# -gt 0 ]; do
        case $1 in
        --minutes) minutes=$2; shift 2 ;;
        --seed) seed=$2; shift 2 ;;
        --report) report=$2; shift 2 ;;
        --builddir) builddir=$2; shift 2 ;;
        --keep) keep=1; shift ;;
        --ttl|--workers|--ignore-pct|--long-pct|--kinds|--weights) pass+=("$1" "$2"); shift 2 ;;
        *) echo "usage: $0 --minutes M --seed S [--report FILE] [--ttl S] [--workers N] [--ignore-pct P] [--long-pct P] [--kinds K,...] [--weights K=N,...] [--builddir DIR] [--keep]" >&2
           exit 64 ;;
        esac
done
[ -n "$minutes" ] && [ -n "$seed" ] || { echo "$0: --minutes and --seed are required" >&2; exit 64; }
[ "$(id -u)" -eq 0 ] || { echo "Bail out! $0 needs root (network namespaces, nftables, cgroups)"; exit 1; }

. "$top/tests/deps.sh"
ensure_deps "${FLEETSEM_CHAOS_DEPS[@]}"
if [ ! -x "$builddir/src/cli/fleetsem" ] || [ ! -x "$builddir/src/agent/fleetsemd" ]; then
        [ -f "$builddir/build.ninja" ] || meson setup "$builddir" "$top" >/dev/null
        meson compile -C "$builddir" >/dev/null
fi

work=$(mktemp -d /tmp/fleetsem-chaos.XXXXXX)
trap '[ -n "$keep" ] && echo "# kept $work" || rm -rf "$work"' EXIT
cc -O2 -Wall -Wextra -Werror -shared -fPIC -o "$work/clockstep.so" "$here/clockstep.c"

echo "# chaos: $minutes minute(s), seed $seed, in $work"
rc=0
python3 "$here/chaos.py" --minutes "$minutes" --seed "$seed" --workdir "$work" \
        --fleetsem "$builddir/src/cli/fleetsem" --fleetsemd "$builddir/src/agent/fleetsemd" \
        --clockstep "$work/clockstep.so" "${pass[@]}" || rc=$?
[ "$rc" -eq 0 ] || { echo "# the harness failed (exit $rc) with seed $seed; kept $work"; keep=1; exit "$rc"; }
python3 "$here/check.py" "$work" "$report" || { rc=$?; keep=1; }
exit "$rc"
