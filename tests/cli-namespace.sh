#!/bin/bash
# One option parser for the command line's verbs (src/cli/cli-util.h,
# cli_getopt()): every verb that takes --namespace refuses a bad one alike,
# with the same message and EX_USAGE (64), before it looks at anything
# else (here: no NAME, no agent). The verbs are the dispatcher's own
# (src/cli/fleetsem.c; not help), so a new verb is held to it too.
. "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/.." && pwd)
: "${FLEETSEM:?}"

mapfile -t VERBS < <(grep -o 'streq(argv\[1\], "[a-z][a-z-]*")' "$SRC/src/cli/fleetsem.c" | cut -d'"' -f2 | grep -vx help)
check "the dispatcher names the verbs (${#VERBS[@]} of them)" [ "${#VERBS[@]}" -ge 12 ]

want='fleetsem: error: Invalid --namespace "bad/ns": use 1-64 of A-Z a-z 0-9 _ . : -'
n=0
for v in "${VERBS[@]}"; do
        help=$("$FLEETSEM" "$v" --help 2>&1)
        is "$?" 0 "fleetsem $v --help"
        [[ $help == *--namespace=NS* ]] || continue
        n=$((n + 1))
        out=$(FLEETSEM_NAMESPACE= "$FLEETSEM" "$v" --namespace=bad/ns </dev/null 2>&1)
        is "$?" 64 "fleetsem $v --namespace=bad/ns: EX_USAGE"
        is "$out" "$want" "... with the one message, and nothing else"
        # A good namespace passes the parser: whatever the verb then says
        # (no NAME, no agent), it is not the namespace's refusal.
        out=$(FLEETSEM_NAMESPACE= "$FLEETSEM" "$v" --namespace=fleetsem-test-none </dev/null 2>&1)
        check "fleetsem $v --namespace=fleetsem-test-none: not refused as a namespace" \
                [ "${out/Invalid --namespace/}" = "$out" ]
done
# Every verb but redis-init (which asks Redis, not an agent) takes it.
is "$n" "$((${#VERBS[@]} - 1))" "every verb that talks to an agent takes --namespace"
done_testing
