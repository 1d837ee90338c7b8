#!/bin/bash
# fleetsem status --watch, on a terminal (a pty of its own): it draws the
# status, draws it again when this host's agent sees a change (its own
# job's grant and release; a wake message about another host's job), not
# only every 10 s, and quits on q and on Ctrl-C, leaving the terminal as it
# was. It needs a terminal, and it does not go with --json.
TTL=5s
. "$(dirname "$0")/lib.sh"

start_redis
start_agent a
start_agent b

# job HOST NAME TAG: holds a slot of NAME until $T/go-TAG exists.
job() {
        fs "$1" run --slots 1 "$2" -- sh -c "while [ ! -e '$T/go-$3' ]; do sleep 0.05; done"
}
W=$T/watch
mkdir -p "$W"
watch_start() {
        rm -f "$W/rc" "$W/screen" "$W/frames"
        FLEETSEM_NAMESPACE=$NSBASE-a /usr/bin/python3 "$(dirname "$0")/pty-screen.py" "$W" "$FLEETSEM" status --watch "$@" &
        watcher=$!
}
screen_has() { grep -qE -- "$1" "$W/screen" 2>/dev/null; }
frames() { cat "$W/frames" 2>/dev/null || echo 0; }
# redrawn_with REGEX [SECONDS]: a new screen since the last call, and it
# matches (within 3 s, or SECONDS).
redrawn_with() {
        local before=$FRAMES
        wait_for "${2:-3}" sh -c "[ \$(cat '$W/frames') -gt $before ] && grep -qE -- '$1' '$W/screen'" || return 1
        FRAMES=$(frames)
}

watch_start w
check "the watch draws the status" wait_for 10 screen_has 'q or Ctrl-C quits'
FRAMES=$(frames)
check "... saying nobody holds anything yet" screen_has 'No slots held or waited for'

# This host's job: its grant is a change the agent sees at once.
job a w ha & ha=$!
check "a job of this host holds w: drawn again within 3 s (not the 10 s refresh)" redrawn_with '^w: 1 held, 0 waiting'
# Two jobs of another host wait, then one of this host (which makes this
# agent listen to w's wake messages).
job b w hb1 & hb1=$!
check "b's first job waits" wait_for 10 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{w}:queue') = 1 ]"
job b w hb2 & hb2=$!
check "b's second job waits" wait_for 10 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{w}:queue') = 2 ]"
job a w ha2 & ha2=$!
check "a's second job waits: drawn again" redrawn_with '^w: 1 held, 3 waiting'
touch "$T/go-ha"
check "a's first job ends: drawn again, b's first holds" redrawn_with '^w: 1 held, 2 waiting'
wait "$ha"
# On b, b's first job ends and hands its slot to b's second: nothing of
# this host changed; this agent hears it in the wake message alone.
touch "$T/go-hb1"
check "b hands over to b: drawn again on the wake message alone" redrawn_with '^w: 1 held, 1 waiting'
is "$(redis-cli -s "$REDIS_SOCK" ZCARD 'fleetsem:{w}:queue')" 1 "... a's second job still waits"
wait "$hb1"
touch "$T/go-hb2"
check "b's second job ends: drawn again, a's waiter holds" redrawn_with '^w: 1 held, 0 waiting'
wait "$hb2"
touch "$T/go-ha2"
wait "$ha2"

pty_press "$W" q
check "q quits" wait_for 5 test -e "$W/rc"
is "$(cat "$W/rc")" 0 "... with status 0"
pty_end "$W" "$watcher"
check "... and the agent stops hearing every name's wake messages" \
        wait_for 5 sh -c "[ \$(redis-cli -s $REDIS_SOCK PUBSUB NUMPAT) = 0 ]"

# Every name, also one no job of this host ever asked for: while someone
# watches, the agent hears every name's wake messages (one pattern).
watch_start
check "a watch of every name draws" wait_for 10 screen_has 'q or Ctrl-C quits'
FRAMES=$(frames)
is "$(redis-cli -s "$REDIS_SOCK" PUBSUB NUMPAT)" 1 "... and its agent hears every name's wake messages"
# Four hand-overs on b, each drawn within 2 s: the 10 s refresh of
# the watch would fall into all four windows about once in 600 runs.
job b far hf1 & hf1=$!
check "b's job holds far" wait_for 10 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{far}:holders') = 1 ]"
for i in 1 2 3 4; do
        job b far hf$((i + 1)) & eval "hf$((i + 1))=\$!"
        check "b's next job of far waits" wait_for 10 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{far}:queue') = 1 ]"
        FRAMES=$(frames)
        touch "$T/go-hf$i"
        check "b hands far over ($i), a name a never followed: drawn again within 2 s" redrawn_with '^far: 1 held, 0 waiting' 2
        eval "wait \$hf$i"
done
touch "$T/go-hf5"
wait "$hf5"
pty_press "$W" q
check "q quits" wait_for 5 test -e "$W/rc"
pty_end "$W" "$watcher"
check "... and the pattern goes with the last watcher" wait_for 5 sh -c "[ \$(redis-cli -s $REDIS_SOCK PUBSUB NUMPAT) = 0 ]"

watch_start
check "a second watch draws" wait_for 10 screen_has 'q or Ctrl-C quits'
pty_press "$W" '\003'
check "Ctrl-C quits" wait_for 5 test -e "$W/rc"
is "$(cat "$W/rc")" 0 "... with status 0"
pty_end "$W" "$watcher"

out=$(fs a status --watch 2>&1 </dev/null); rc=$?
is "$rc" 64 "without a terminal: 64"
like "$out" 'needs a terminal' "... saying why"
fs a status --watch --json >/dev/null 2>&1
is "$?" 64 "--watch with --json: 64"
like "$(raw a WATCH)" '^WATCHING' "the agent answers WATCH with WATCHING"
done_testing
