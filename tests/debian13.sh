#!/bin/bash
# Debian 13 (trixie: hiredis 1.2, systemd 257, Linux-PAM 1.7, Redis 8.0,
# Valkey 8.1), as root:  bash tests/debian13.sh
# In a Debian 13 root that it builds with debootstrap from the machine's
# Debian mirror (once; kept in $FLEETSEM_TEST_ROOT, default
# /var/cache/fleetsem-tests, beside the Debian 12 root of the systemd
# tests), under systemd-nspawn with a throw-away overlay:
#   1. builds fleetsem from this tree (warnings are errors);
#   2. runs the unit, lua and ha suites and the redis tests of what the
#      server itself does (server_tests, below) against Redis 8;
#   3. runs the lua and ha suites (but for the Sentinel flap, split and
#      backoff tests) and those redis tests again against Valkey 8
#      (FLEETSEM_TEST_SERVER=valkey);
#   4. builds the Debian packages (dpkg-buildpackage) and checks them with
#      lintian --fail-on error,warning.
# Prints what each step printed (meson's own summaries), then TAP, one line
# a step, and exits non-zero when one failed.
set -uo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
[ "$(id -u)" -eq 0 ] || { echo "Bail out! needs root (debootstrap, systemd-nspawn)"; exit 1; }
for c in debootstrap systemd-nspawn; do
        command -v "$c" >/dev/null || { echo "Bail out! $c is not installed"; exit 1; }
done

# debootstrap installs the base; apt-get the rest, whose maintainer
# scripts (perl's, for lintian) debootstrap does not order well.
PACKAGES=gcc,libc6-dev,meson,ninja-build,pkg-config,python3,libhiredis-dev,libsystemd-dev,libpam0g-dev
PACKAGES+=,redis-server,redis-tools,redis-sentinel,valkey-server,valkey-sentinel
PACKAGES+=,procps,util-linux,systemd,openssl,stunnel4,libpam-wrapper,pamtester,iproute2
EXTRA=(libssl-dev systemd-dev libnss-wrapper openssh-client bash-completion prometheus build-essential debhelper
       dpkg-dev fakeroot lintian)
ROOT_REV=2              # bump when what the root is built from changes
CACHE=${FLEETSEM_TEST_ROOT:-/var/cache/fleetsem-tests}
MIRROR=${FLEETSEM_TEST_MIRROR:-$(sed -n 's/^URIs: *\(http[^ ]*debian\)$/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n1)}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
ROOT=$CACHE/trixie-$(echo "$PACKAGES ${EXTRA[*]} $ROOT_REV" | md5sum | cut -c1-8)

mkdir -p "$CACHE"
(
        flock 9
        [ -x "$ROOT/usr/bin/meson" ] && exit 0
        rm -rf "$ROOT.new"
        echo "# building the Debian 13 root in $ROOT (debootstrap, a minute or two)"
        debootstrap --variant=minbase --include="$PACKAGES" trixie "$ROOT.new" "$MIRROR" >"$CACHE/trixie.log" 2>&1 ||
                { tail -n 20 "$CACHE/trixie.log"; exit 1; }
        chroot "$ROOT.new" sh -c "apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
                --no-install-recommends ${EXTRA[*]}" >>"$CACHE/trixie.log" 2>&1 || { tail -n 20 "$CACHE/trixie.log"; exit 1; }
        mv "$ROOT.new" "$ROOT"
) 9>"$CACHE/.lock" || { echo "Bail out! cannot build the Debian 13 root"; exit 1; }

versions=$(chroot "$ROOT" dpkg-query -W -f='${Package} ${Version}\n' libhiredis-dev systemd libpam0g-dev redis-server \
        valkey-server | awk '{ printf "%s%s %s", sep, $1, $2; sep = ", " }')
echo "# Debian $(cat "$ROOT/etc/debian_version"): $versions"

# What runs inside: each step's status on a line "step NAME RC SECONDS"
# for the TAP below; everything else is each step's own output.
inside='
set -u
step() { local name=$1 t0=$SECONDS; shift; "$@"; rc=$?; echo "step $name $rc $((SECONDS - t0))"; }
build() { meson setup /tmp/build /src >/tmp/setup.log 2>&1 || { tail -n 30 /tmp/setup.log; return 1; }
          meson compile -C /tmp/build >/tmp/compile.log 2>&1 || { tail -n 30 /tmp/compile.log; return 1; }; }
suites() { meson test -C /tmp/build --no-rebuild --logbase "${LOGBASE:-testlog}" --print-errorlogs "$@" 2>&1 |
           grep -v "^ *[0-9]*/[0-9]* .* OK "; return "${PIPESTATUS[0]}"; }
packages() {
        mkdir -p /tmp/pkg/src &&
        tar -C /src --exclude-vcs --exclude-tag-all=build.ninja --exclude=./debian/tmp -cf - . | tar -C /tmp/pkg/src -xf - &&
        (cd /tmp/pkg/src && dpkg-buildpackage -us -uc -b >/tmp/pkg.log 2>&1) || { tail -n 30 /tmp/pkg.log; return 1; }
        ls /tmp/pkg/*.deb
        lintian --fail-on error,warning /tmp/pkg/*.changes
}
step build build; [ "$rc" -eq 0 ] || exit 0
# What a newer server or library can change: the scripts (lua), Sentinel,
# Cluster, ACL and TLS (ha), and the redis tests of what the server itself
# does: restarts and snapshots, eviction, keys lost, the library and the
# data model kept in it, AUTH, a hung server. The rest of the redis suite
# and the security suite test the agent, the same code with either
# server, and run on Debian 12 in the plain and the sanitizer pass.
# redis-reset kills Redis at ROUNDS points of a holder renewal period:
# the sweep is about the timing of the agent, run whole on Debian 12 (8
# points, 5 under the sanitizers); here it is about the restart of the
# server, at 4.
export ROUNDS=4
server_tests="redis-invariant redis-fifo redis-restart redis-reset redis-agent-restart redis-eviction redis-forget
        redis-safety redis-library redis-model redis-auth redis-tls redis-hang"
# (meson test runs the tests that are of the suites given and named, if
# any are: each step gives the names of its tests, in one run, so that
# the longest start first and the cores stay busy to the end.)
# tests_of SUITE...: the names of their tests, a line each; fails, saying
# so, when a suite lists none (a step must not run fewer than it says).
tests_of() { local s names; for s in "$@"; do
        names=$(meson test -C /tmp/build --suite "$s" --list 2>&1 | sed -n "s/^fleetsem:$s \/ //p")
        [ -n "$names" ] || { echo "no tests listed in the $s suite" >&2; return 1; }
        echo "$names"; done; }
# (Not model-replay: the rules of the model against those of the library,
# which the other lua tests check on each server; the root has no spin.)
redis8() { local names; names=$(tests_of unit lua ha) || return 1; suites $(echo "$names" | grep -vx model-replay) $server_tests; }
# Against Valkey, the ha suite but the two slow Sentinel failover tests
# (flap, split: the code of Sentinel and of the agent, the same with
# either server, run against Redis 8 above) and the backoff of the agent
# (a fake Sentinel), for the time of CI.
valkey() {
        local names; names=$(tests_of lua ha) || return 1
        suites $(echo "$names" | grep -vx -e ha-sentinel-flap -e ha-sentinel-split -e ha-sentinel-backoff -e model-replay) \
                $server_tests
}
# The suites against Redis 8 and against Valkey 8 at once, each with half
# the tests at a time (they wait on timers, not the CPU: both together put
# as many tests on the machine as one alone at one more than its cores),
# each with a log of its own; what each printed, whole, after.
half=$(( (${MESON_TESTTHREADS:-3} + 1) / 2 ))
MESON_TESTTHREADS=$half LOGBASE=redis8 step redis redis8 >/tmp/redis8.out 2>&1 &
MESON_TESTTHREADS=$half LOGBASE=valkey FLEETSEM_TEST_SERVER=valkey step valkey valkey >/tmp/valkey.out 2>&1 &
wait
cat /tmp/redis8.out /tmp/valkey.out
step packages packages
'
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# As many open files as on the host (the security tests fill a listen
# backlog of 4096 with one process; nspawn's default is 1024).
systemd-nspawn -q --register=no --keep-unit -M "fleetsem13-$$" --volatile=overlay -D "$ROOT" --rlimit=NOFILE=65536 \
        --bind-ro="$SRC:/src" --setenv=LC_ALL=C.UTF-8 --setenv=CI="${CI:-}" \
        --setenv=MESON_TESTTHREADS="${MESON_TESTTHREADS:-$(($(nproc) + 1))}" bash -c "$inside" 2>&1 | tee "$out"

steps=(build "builds, warnings as errors"
       redis "the unit, lua and ha suites and the server's redis tests pass against Redis 8"
       valkey "the lua and ha suites (but ha-sentinel-flap, -split, -backoff) and the server's redis tests pass against Valkey 8"
       packages "dpkg-buildpackage builds both packages, lintian clean of errors and warnings")
echo "1..$(( ${#steps[@]} / 2 ))"
failed=0 n=0
for ((i = 0; i < ${#steps[@]}; i += 2)); do
        n=$((n + 1))
        read -r rc secs < <(tr -d '\r' <"$out" | awk -v s="${steps[i]}" '$1 == "step" && $2 == s { print $3, $4 }' | tail -n 1)
        if [ "${rc:-}" = 0 ]; then
                echo "ok $n - Debian 13, ${steps[i]}: ${steps[i + 1]} ($secs s)"
        else
                # The tests that failed in the step, named on its line: the
                # tail of a long log is what is read first.
                names=$(tr -d '\r' <"$out" | awk -v s="${steps[i]}" '
                        $1 == "step" { if ($2 == s) { print failed; exit } failed = ""; delete seen }
                        / fleetsem:[a-z0-9-]+ \/ [a-z0-9-]+ +(FAIL|ERROR|TIMEOUT)/ {
                                for (k = 1; k < NF; k++) if ($k ~ /^fleetsem:/) break
                                if (seen[$(k + 2)]++) next      # (meson names it again in its summary)
                                failed = failed (failed == "" ? "" : ", ") $(k + 2) " " $(k + 3) }')
                echo "not ok $n - Debian 13, ${steps[i]}: ${steps[i + 1]} ($([ -n "$rc" ] && echo "exit $rc" || echo "did not run")${names:+; failed: $names})"
                failed=$((failed + 1))
        fi
done
echo "# $((n - failed)) passed, $failed failed"
[ "$failed" -eq 0 ]
