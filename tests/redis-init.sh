#!/bin/bash
# fleetsem redis-init (root): a new Redis declared empty through the
# agent's configuration, so that the first agent grants at once instead of
# waiting out a lease of grace. Refused, with nothing written, where Redis
# holds any key of fleetsem's, for another user than root, and where Redis
# cannot be reached; run again, it says it was done. Another
# application's keys are no reason to refuse.
TTL=15s         # a grace (one lease) the checks below would see
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || skip_all "fleetsem redis-init runs as root only"

# New: nothing in it. On loopback TCP too, for a user of the ACL (under
# FLEETSEM_TEST_ACL=1 that port is there already: the agents' own).
if acl_audit; then
        REDIS_SEEDED=1 start_redis
        PORT=$ACL_PORT
else
        PORT=$(free_port)
        REDIS_SEEDED=1 start_redis --port "$PORT" --bind 127.0.0.1
fi
printf 'redis = unix:%s\nlease_ttl = %s\n' "$REDIS_SOCK" "$TTL" >"$T/fleetsem.conf"
init() { "$FLEETSEM" redis-init --config "$T/fleetsem.conf" "$@"; }
keys() { rcli --scan | sort | tr '\n' ' '; }

out=$(setpriv --reuid=nobody --regid=nogroup --clear-groups "$FLEETSEM" redis-init --config "$T/fleetsem.conf" 2>&1)
is "$?" 77 "another user than root is refused (77)"
like "$out" "Only root may declare Redis empty" "... saying so"
is "$(keys)" "" "... and nothing is written"

printf 'redis = unix:%s/none.sock\n' "$T" >"$T/none.conf"
out=$("$FLEETSEM" redis-init --config "$T/none.conf" 2>&1)
is "$?" 69 "a Redis that cannot be reached: 69"
like "$out" "Redis at unix:$T/none.sock cannot be reached: No such file or directory; nothing written\." \
        "... saying which and why"

# A user the ACL gives no SCAN (as the shipped ACL's agent user): refused,
# saying what to do. (ACL LOG: the refusal asked for, not an agent's.)
acl_user noscan "$T/ns.pw" '~fleetsem:*' '&fleetsem:*' +@all -scan
printf 'redis = redis://noscan@127.0.0.1:%s\nredis_password_file = %s\n' "$PORT" "$T/ns.pw" >"$T/noscan.conf"
out=$("$FLEETSEM" redis-init --config "$T/noscan.conf" 2>&1)
is "$?" 78 "a user that may not SCAN: refused as a configuration it cannot use (78)"
like "$out" "^Redis at 127\.0\.0\.1:$PORT refused SCAN: NOPERM" "... saying what Redis refused"
like "$out" "^Its user may not SCAN: run with a configuration that logs in as an operator \(fleetsem redis-init --config FILE\), or give the user \+scan\.$" \
        "... and what to do"
is "$(keys)" "" "... and nothing is written"
rcli ACL LOG RESET >/dev/null

# A key of fleetsem's (a name's holders, as an agent leaves them): refused.
rcli SET app:x 1 >/dev/null
rcli ZADD 'fleetsem:{job}:holders' 99999999999999 0123456789abcdef0123456789abcdef >/dev/null
out=$(init 2>&1)
is "$?" 65 "a Redis that holds a key of fleetsem's is refused (65)"
like "$out" "Redis at unix:$REDIS_SOCK holds fleetsem's keys \(fleetsem:\{job\}:holders\): it is or was in use" \
        "... naming the key"
is "$(keys)" "app:x fleetsem:{job}:holders " "... and nothing is written"
rcli DEL 'fleetsem:{job}:holders' >/dev/null

# Empty of fleetsem's keys (another application's are there): declared.
out=$(init 2>&1)
is "$?" 0 "a Redis with no key of fleetsem's is declared empty (0)"
like "$out" "Redis at unix:$REDIS_SOCK declared empty: it held no fleetsem key; fleetsem:epoch and fleetsem:census written" \
        "... saying what it wrote"
epoch=$(rcli GET fleetsem:epoch)
like "$epoch" '^[0-9a-f]{32} 0$' "the epoch is a new id whose grace ended long ago, naming no master (one Redis)"
is "$(rcli ZRANGE fleetsem:census 0 -1 WITHSCORES | tr '\n' ' ')" ". -1 " "the census holds its mark alone, made long ago"
is "$(keys)" "app:x fleetsem:census fleetsem:epoch " "nothing else is written, the other keys are left alone"

out=$(init 2>&1)
is "$?" 0 "run again: 0"
like "$out" "is declared empty already \(fleetsem:epoch, fleetsem:census\); nothing written\." "... saying it was done"
is "$(rcli GET fleetsem:epoch)" "$epoch" "... the epoch unchanged"

# The first agent grants at once: no grace of a first use.
start_agent a
out=$(fs a run --slots 1 --no-wait first -- echo ran 2>&1)
is "$?" 0 "the first request, without waiting, is granted at once"
is "$out" "ran" "... and its command runs"
is "$(metric a fleetsem_reset_grace_seconds)" 0 "metrics: no grace"
like "$(fs a status --json)" '^\{"now_ms":[0-9]+,"redis":.*,"grace":null,' "status: no grace"
agent_lacks a 'No slot is granted through Redis' "the agent logs no grace"
is "$(rcli GET fleetsem:epoch)" "$epoch" "the agent kept the declared epoch"

# Now in use: refused, nothing written.
before=$(keys)
out=$(init 2>&1)
is "$?" 65 "a Redis in use is refused (65)"
like "$out" "holds (fleetsem's keys|a census)" "... saying it holds fleetsem's state"
is "$(keys)" "$before" "... and nothing is written"
is "$(rcli GET fleetsem:epoch)" "$epoch" "... the epoch unchanged"

done_testing
