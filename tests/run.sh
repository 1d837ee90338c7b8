#!/bin/bash
# Builds fleetsem and runs the whole test suite against real redis-servers
# it starts itself:  bash tests/run.sh [--sanitize]
# --sanitize: a separate build (build-asan) under ASan and UBSan, with leak
# checking.
set -euo pipefail
cd "$(dirname "$0")/.."
. tests/deps.sh
ensure_deps

builddir=build
opts=() suites=()
if [ "${1:-}" = --sanitize ]; then
        builddir=build-asan
        opts=(-Db_sanitize=address,undefined -Db_lundef=false)
        export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:halt_on_error=1
        export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
        # This pass looks for memory and undefined-behaviour errors; the
        # tests that repeat a scenario to catch races (20 rounds in the
        # plain pass) repeat it 5 times here.
        export ROUNDS=${ROUNDS:-5}
        # The lua suite runs the scripts in Redis and this build's code
        # not at all: the plain pass has it.
        suites=(--no-suite lua)
fi
# The tests that wait on conditions run beside each other, one more at a
# time than there are cores: they mostly wait on timers, not the CPU
# (tests/meson.build, SHARED). (tests/debian13.sh runs its suites so too.)
export MESON_TESTTHREADS=${MESON_TESTTHREADS:-$(($(nproc) + 1))}
[ -f "$builddir/build.ninja" ] || meson setup "$builddir" "${opts[@]}"
meson compile -C "$builddir"
meson test -C "$builddir" --print-errorlogs "${suites[@]}"
