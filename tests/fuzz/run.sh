#!/bin/bash
# Builds the libFuzzer targets (build-fuzz, clang, ASan+UBSan) and runs each
# for SECONDS (default 30), starting from its seeds in tests/fuzz/corpus/:
#   bash tests/fuzz/run.sh [SECONDS]
# Prints each target's executions, coverage and crashes, then "N passed,
# N failed"; exits non-zero when any target crashed. What a run finds stays
# in build-fuzz/fuzz/: the grown corpus, and crash-* inputs to replay with
# build-fuzz/tests/fuzz/TARGET FILE.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/deps.sh
ensure_deps "${FLEETSEM_FUZZ_DEPS[@]}"

seconds=${1:-30}
case $seconds in
''|*[!0-9]*) echo "usage: $0 [SECONDS]" >&2; exit 64 ;;
esac

[ -f build-fuzz/build.ninja ] || CC=clang meson setup build-fuzz -Dfuzzing=true
meson compile -C build-fuzz

# One target: its summary line, and its status (0 clean).
fuzz_one() {
        local t=$1 seeds=$2 work=build-fuzz/fuzz/$1 rc=0 execs cov f
        mkdir -p "$work/corpus"
        rm -f "$work"/crash-* "$work"/oom-* "$work"/timeout-* "$work"/leak-*
        # New inputs go to the first directory only: the seeds stay as they are.
        timeout $((seconds + 120)) build-fuzz/tests/fuzz/"$t" -max_total_time="$seconds" -timeout=25 \
                -print_final_stats=1 -artifact_prefix="$work/" "$work/corpus" "$seeds" \
                >"$work/log" 2>&1 || rc=$?
        execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -1)
        cov=$(sed -n 's/.*cov: \([0-9]*\).*/\1/p' "$work/log" | tail -1)
        if [ "$rc" -eq 0 ]; then
                echo "$t: ${execs:-?} executions, cov ${cov:-?}, 0 crashes"
                return 0
        fi
        echo "$t: ${execs:-?} executions, cov ${cov:-?}, 1 crash (exit $rc); see $work/log"
        sed -n -E '/check failed|ERROR: /{s/^/  /p;q}' "$work/log"
        for f in "$work"/crash-* "$work"/oom-* "$work"/timeout-* "$work"/leak-*; do
                if [ -e "$f" ]; then echo "  input: $f"; fi
        done
        return 1
}

# As many targets at once as there are cores: each runs SECONDS alone.
# Every target is run: one without seeds fails here instead of being left out.
jobs=$(nproc)
passed=0 failed=0
targets=()
for src in tests/fuzz/fuzz-*.c; do
        t=$(basename "$src" .c)
        if [ -z "$(ls -A "tests/fuzz/corpus/$t" 2>/dev/null)" ]; then
                echo "$t: no seeds in tests/fuzz/corpus/$t/"
                failed=$((failed + 1))
                continue
        fi
        targets+=("tests/fuzz/corpus/$t/")
done
for ((i = 0; i < ${#targets[@]}; i += jobs)); do
        pids=()
        for ((j = i; j < i + jobs && j < ${#targets[@]}; j++)); do
                fuzz_one "$(basename "${targets[j]}")" "${targets[j]}" >"build-fuzz/fuzz-summary-$j" &
                pids+=($!)
        done
        for ((j = 0; j < ${#pids[@]}; j++)); do
                if wait "${pids[j]}"; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
                cat "build-fuzz/fuzz-summary-$((i + j))"
        done
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
