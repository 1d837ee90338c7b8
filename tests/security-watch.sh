#!/bin/bash
# status --watch as nobody: the agent subscribes to every name's wake
# messages (one PSUBSCRIBE, which makes Redis send it the whole fleet's
# traffic) for root's watches only. Nobody's watch makes none, and is still
# drawn again on the changes this host sees.
TTL=5s
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-security.sh"

start_redis
start_agent a
start_agent b
cp "$(dirname "$0")/pty-screen.py" "$T/pty-screen.py"
chmod 644 "$T/pty-screen.py"

# job HOST NAME TAG: holds a slot of NAME until $T/go-TAG exists.
job() {
        fs "$1" run --slots 1 "$2" -- sh -c "while [ ! -e '$T/go-$3' ]; do sleep 0.05; done"
}
numpat() { rcli PUBSUB NUMPAT; }
numpat_is() { [ "$(numpat)" = "$1" ]; }
# watch_start DIR [as_nobody]: status --watch on host a, on a pty of its own.
watch_start() {
        local d=$1; shift
        mkdir -p "$d"
        chmod 777 "$d"
        "$@" env FLEETSEM_NAMESPACE="$NSBASE-a" /usr/bin/python3 "$T/pty-screen.py" "$d" "$FLEETSEM" status --watch &
}
frames() { cat "$1/frames" 2>/dev/null || echo 0; }
# redrawn_with DIR REGEX: a new screen since the last call, and it matches
# (within 3 s: not the 10 s refresh).
redrawn_with() {
        local before=$FRAMES
        wait_for 3 sh -c "[ \$(cat '$1/frames') -gt $before ] && grep -qE -- '$2' '$1/screen'" || return 1
        FRAMES=$(frames "$1")
}

N=$T/watch-nobody R=$T/watch-root
watch_start "$N" as_nobody; nobody_watch=$!
check "nobody's watch draws" wait_for 10 grep -q 'q or Ctrl-C quits' "$N/screen"
FRAMES=$(frames "$N")

# A name this host uses: b holds it, a's job waits, b lets go.
job b u hb & hb=$!
check "b's job holds u" wait_for 10 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{u}:holders') = 1 ]"
job a u ha & ha=$!
check "a's job waits for u: nobody's watch drawn again" redrawn_with "$N" '^u: 1 held, 1 waiting'
touch "$T/go-hb"
check "b lets go, a's job holds: drawn again" redrawn_with "$N" '^u: 1 held, 0 waiting'
wait "$hb"
is "$(numpat)" 0 "while nobody watches, the agent subscribes to no pattern (PUBSUB NUMPAT)"
touch "$T/go-ha"
check "a's job ends: drawn again" redrawn_with "$N" '^No slots held or waited for'
wait "$ha"

watch_start "$R"; root_watch=$!
check "root's watch draws" wait_for 10 grep -q 'q or Ctrl-C quits' "$R/screen"
check "while root watches, the agent hears every name's wake messages (one pattern)" wait_for 5 numpat_is 1
pty_press "$R" q
check "root's watch quits" wait_for 5 test -e "$R/rc"
pty_end "$R" "$root_watch"
check "... and the pattern goes with it, though nobody still watches" wait_for 5 numpat_is 0
check "nobody's watch still runs" test ! -e "$N/rc"

pty_press "$N" q
check "nobody's watch quits" wait_for 5 test -e "$N/rc"
is "$(cat "$N/rc")" 0 "... with status 0"
pty_end "$N" "$nobody_watch"
done_testing
