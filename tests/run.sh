#!/bin/bash
# Builds fleetsem and runs the whole test suite against real redis-servers
# it starts itself:  bash tests/run.sh [--sanitize] [--busy] [MESON TEST ARGS...]
# --sanitize: a separate build (build-asan) under ASan and UBSan, with leak
# checking.
# --busy (root): the suite on a busy machine, as a verdict must hold on one:
# two CPU-bound processes (yes) beside it the whole time, and the suite's
# own processes limited to half the machine's CPU by a control group of
# their own (cgroup v2's cpu.max, or v1's cpu.cfs_quota_us where the cpu
# controller is on a v1 hierarchy). Both are undone at the end. Arguments
# after the options go to meson test (a test's name runs that test alone).
set -euo pipefail
cd "$(dirname "$0")/.."
. tests/deps.sh
ensure_deps

builddir=build
opts=() suites=() busy=false
while [ $# -gt 0 ]; do
        case $1 in
        --sanitize)
                builddir=build-asan
                opts=(-Db_sanitize=address,undefined -Db_lundef=false)
                export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:halt_on_error=1
                export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
                # This pass looks for memory and undefined-behaviour errors; the
                # tests that repeat a scenario to catch races (20 rounds in the
                # plain pass) repeat it 5 times here.
                export ROUNDS=${ROUNDS:-5}
                # security-memory-flood's 45 s measure Redis' memory, the same
                # with either build; this pass runs the agent's code of the
                # names' cap, its refusals and the index' trimming through a
                # flood of 27 s, its names living 6 s: as many lives.
                export FLOOD_SECONDS=${FLOOD_SECONDS:-27}
                # The lua suite runs the scripts in Redis and this build's code
                # not at all: the plain pass has it.
                suites=(--no-suite lua) ;;
        --busy) busy=true ;;
        *) break ;;
        esac
        shift
done

# The busy machine of --busy: the hogs started before this shell moves into
# the limited group, so that they stay outside it and take what they can.
# The group is made a child of the hierarchy's root, and the shell goes
# back at the end to the group it came from (its line of /proc/self/cgroup:
# "0::PATH" on v2, the one naming the cpu controller on v1), not to the
# root: on v2 no group but the root takes a process once it has a
# controller on for its children (a container's own root is such a group).
cgroot=/sys/fs/cgroup
hogs=() busy_cg="" busy_back=""
busy_cleanup() {
        local p
        for p in "${hogs[@]}"; do kill "$p" 2>/dev/null || true; done
        [ -n "$busy_cg" ] || return 0
        # Back into the group we came from, then the group removed (it must
        # be empty: a test that left a process behind says so here).
        echo $$ >"$busy_back/cgroup.procs" || echo "run.sh: could not go back to $busy_back" >&2
        rmdir "$busy_cg" || echo "run.sh: $busy_cg not removed: $(cat "$busy_cg/cgroup.procs" | tr '\n' ' ')" >&2
}
if $busy; then
        [ "$(id -u)" = 0 ] || { echo "run.sh: --busy needs root (a control group)" >&2; exit 2; }
        trap busy_cleanup EXIT
        for _ in 1 2; do
                yes >/dev/null &
                hogs+=($!)
        done
        half=$(($(nproc) * 100000 / 2))
        if grep -qw cpu "$cgroot/cgroup.controllers" 2>/dev/null; then
                busy_parent=$cgroot
                busy_back=$cgroot$(sed -n 's/^0:://p' /proc/self/cgroup)
                grep -qw cpu "$busy_parent/cgroup.subtree_control" ||
                        echo +cpu 2>/dev/null >"$busy_parent/cgroup.subtree_control" || {
                        echo "run.sh: --busy: the cpu controller cannot be turned on in $busy_parent (on v2 a group other than the root holding processes, as a container's, cannot give it to its children: move them into a group of their own first)" >&2
                        exit 2
                }
                busy_cg=$busy_parent/fleetsem-busy.$$
                mkdir "$busy_cg"
                echo "$half 100000" >"$busy_cg/cpu.max"
        elif [ -f "$cgroot/cpu/cpu.cfs_quota_us" ]; then
                busy_parent=$cgroot/cpu
                busy_back=$busy_parent$(sed -En 's/^[0-9]+:([^:]*,)?cpu(,[^:]*)?:(.*)$/\3/p' /proc/self/cgroup)
                busy_cg=$busy_parent/fleetsem-busy.$$
                mkdir "$busy_cg"
                echo 100000 >"$busy_cg/cpu.cfs_period_us"
                echo "$half" >"$busy_cg/cpu.cfs_quota_us"
        else
                echo "run.sh: --busy: no cpu controller under $cgroot (v2 cpu.max or v1 cpu)" >&2
                exit 2
        fi
        echo $$ >"$busy_cg/cgroup.procs"
        echo "run.sh: --busy: ${#hogs[@]} CPU hogs (yes), the suite limited to $half us of CPU a 100 ms period ($busy_cg)"
fi
# The tests that wait on conditions run beside each other, one more at a
# time than there are cores: they mostly wait on timers, not the CPU
# (tests/meson.build, SHARED). Not more: with four at a time on 2 cores
# the tests' own times summed 2419 s where three took 1747 s, and the
# phase took as long (802 and 924 s, against 809 and 845 s): the suite's
# checks (a process each) fill the cores. (tests/debian13.sh runs its
# suites so too.)
export MESON_TESTTHREADS=${MESON_TESTTHREADS:-$(($(nproc) + 1))}
[ -f "$builddir/build.ninja" ] || meson setup "$builddir" "${opts[@]}"
meson compile -C "$builddir"
meson test -C "$builddir" --print-errorlogs "${suites[@]}" "$@"
