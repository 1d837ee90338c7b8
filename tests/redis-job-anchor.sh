#!/bin/bash
# COMMAND inherits the anchor of "fleetsem run": the slot lives as long as
# run or any process of the job that keeps the anchor open, so a job whose
# run was killed with SIGKILL holds its slot until its last process ends
# (the agent keeps renewing it, and a restarted agent re-adopts it), and
# nobody else gets in meanwhile. A process that closed the anchor holds
# nothing. When the slot is lost, the fence reaches the whole process group.
. "$(dirname "$0")/lib.sh"

start_redis
start_agent a
start_agent b

# hold.sh PIDFILE STOPFILE: notes its pid, runs until STOPFILE exists.
cat >"$T/hold.sh" <<'EOF'
echo $$ >"$1"
while [ ! -e "$2" ]; do sleep 0.05; done
EOF
# A process that exited is gone, zombie or not (orphans wait for init to
# reap them, and an exiting process has closed its files).
gone() { [ "$(sed -n 's/.*) \(.\) .*/\1/p' "/proc/$1/stat" 2>/dev/null)" = Z ] || ! kill -0 "$1" 2>/dev/null; }
alive() { ! gone "$1"; }
lease_of() { rcli ZRANGE "fleetsem:{$1}:holders" 0 -1; }
expiry_of() { rcli ZSCORE "fleetsem:{$1}:holders" "$2"; }
no_wait() { fs "$1" run --slots 1 --no-wait "$2" -- true 2>/dev/null; echo $?; }

# --- 1. kill -9 of run while the job's second process runs on ---------------
fs_exec a run --slots 1 ja -- sh -c 'sh "$0" "$1" "$2"; echo after' "$T/hold.sh" "$T/bg1" "$T/stop1" &
run1=$!
check "the job holds" wait_for 5 test -s "$T/bg1"
bg1=$(cat "$T/bg1")
first1=$(pgrep -P "$run1" sh)
lease1=$(lease_of ja)
is "$(holders ja)" 1 "one holder in Redis"

kill -KILL "$run1"
wait "$run1"
is "$?" 137 "run was killed"
check "the job's first process got SIGTERM and ended" wait_for 5 gone "$first1"
check "its second process runs on" alive "$bg1"
check "the agent watches the anchor again, held by the job alone" \
        wait_for 5 grep -q "Watch on the anchor of lease $lease1 (ja) ended, but the anchor still listens" "$T/agent-a.log"
is "$(no_wait b ja)" 75 "run --no-wait on another host is refused"
is "$(no_wait a ja)" 75 "run --no-wait on the same host is refused"
is "$(lease_of ja)" "$lease1" "Redis: the killed run's lease still holds, and nobody else"
# Past a whole lease: the agent renews the slot of a job without its run.
exp0=$(expiry_of ja "$lease1")
check "Redis: the agent keeps renewing it" wait_for 5 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZSCORE 'fleetsem:{ja}:holders' $lease1) -gt $((exp0 + 1000)) ]"
still_lease1() { [ "$(lease_of ja)" = "$lease1" ]; }
# One more lease: unrenewed, it would have run out.
check "Redis: still held after more than a lease" still_after "${TTL%s}" still_lease1
is "$(no_wait b ja)" 75 "and still refused to others"

# The agent restarts while only the job holds the anchor: nobody accepts a
# watch connection any more; the new agent re-adopts through one pending
# in the anchor's backlog.
kill -TERM "$(agent_pid a)"
wait "$(agent_pid a)"
is "$?" 0 "agent a exits cleanly on SIGTERM"
start_agent a
check "the new agent re-adopts the job's slot" wait_for 5 grep -q "Re-adopted 1 held slot" "$T/agent-a.log"
check "Redis: still held after a lease under the new agent" still_after "${TTL%s}" still_lease1
is "$(no_wait b ja)" 75 "and still refused to others"

touch "$T/stop1"
check "the job's last process ends" wait_for 5 gone "$bg1"
t0=$(now_ms)
check "then the slot is free" wait_for 5 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{ja}:holders') = 0 ]"
echo "# released within $(( $(now_ms) - t0 )) ms of the job's last process exiting"
is "$(no_wait b ja)" 0 "a new run --no-wait is granted"

# --- 2. flock(1) semantics, and a job that closes its copy -----------------
# Normal exit with a background process: it keeps the slot.
fs a run --slots 1 jb -- sh -c 'sh "$0" "$1" "$2" &' "$T/hold.sh" "$T/bg2" "$T/stop2"
is "$?" 0 "run exits with COMMAND's status while a background process runs on"
check "the background process runs" wait_for 5 test -s "$T/bg2"
bg2=$(cat "$T/bg2")
is "$(holders jb)" 1 "Redis: the background process holds the slot"
is "$(no_wait b jb)" 75 "run --no-wait is refused"
touch "$T/stop2"
check "the background process ends" wait_for 5 gone "$bg2"
check "then the slot is free" wait_for 5 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{jb}:holders') = 0 ]"

# A background process that closed the anchor holds nothing.
fs a run --slots 1 jc -- sh -c '(eval "exec $FLEETSEM_ANCHOR_FD>&-"; exec sh "$0" "$1" "$2") &' \
        "$T/hold.sh" "$T/bg3" "$T/stop3"
is "$?" 0 "run exits; its background process closed the anchor"
check "the background process runs" wait_for 5 test -s "$T/bg3"
check "Redis: the slot is free at once" wait_for 5 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{jc}:holders') = 0 ]"
is "$(no_wait b jc)" 0 "run --no-wait is granted while it runs"
check "it still runs" alive "$(cat "$T/bg3")"
touch "$T/stop3"

# kill -9 of a run whose job closed the anchor: nobody holds it any more.
fs_exec a run --slots 1 jd -- sh -c 'readlink /proc/$$/fd/$FLEETSEM_ANCHOR_FD >"$0/fd4"; eval "exec $FLEETSEM_ANCHOR_FD>&-"; sh "$0/hold.sh" "$1" "$2"' \
        "$T" "$T/bg4" "$T/stop4" &
run4=$!
check "the job holds" wait_for 5 test -s "$T/bg4"
inode=$(sed -n 's/^socket:\[\([0-9]*\)\]$/\1/p' "$T/fd4")
lease4=$(lease_of jd)
check "FLEETSEM_ANCHOR_FD is the anchor (socket $inode listens on @…/lease/$lease4)" \
        grep -qE "^[0-9a-f]+: [0-9A-F]+ [0-9A-F]+ [0-9A-F]+ [0-9A-F]+ 01 ${inode:-none} @$NSBASE-a/lease/$lease4\$" /proc/net/unix
kill -KILL "$run4"
wait "$run4"
check "Redis: the slot is free at once" wait_for 5 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{jd}:holders') = 0 ]"
check "while the job's second process runs on" alive "$(cat "$T/bg4")"
is "$(no_wait b jd)" 0 "run --no-wait is granted"
touch "$T/stop4"

# --- 3. the fence reaches the whole process group -----------------------------
# Agent a stopped: run hears no RENEWED for 2/3 of the lease and acts on
# --on-lost=term: SIGTERM to the group, and SIGKILL to what is left of it
# when its first process has ended (run does not stay to send it later).
fs_exec a run --slots 1 --on-lost=term je -- sh -c \
        'sleep 300 & echo $! >"$0/gc1"; (trap "" TERM; exec sleep 301) & echo $! >"$0/gc2"; wait' "$T" \
        2>"$T/run-e.log" &
run5=$!
check "the job holds" wait_for 5 sh -c "test -s '$T/gc1' && test -s '$T/gc2'"
gc1=$(cat "$T/gc1")
gc2=$(cat "$T/gc2")
fs_exec b run --slots 1 je -- sh -c 'date +%s%3N >"$0"' "$T/granted5" &
waiter5=$!
check "a job on b waits" wait_for 5 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{je}:queue') = 1 ]"
kill -STOP "$(agent_pid a)"
wait_for 10 gone "$run5" || kill -KILL "$run5"
wait "$run5"
is "$?" 75 "run fences itself (exit 75)"
check "the grandchild is terminated" wait_for 5 gone "$gc1"
check "the grandchild that ignores SIGTERM is killed" wait_for 5 gone "$gc2"
check "b's job gets the slot" wait_for 10 test -s "$T/granted5"
kill -CONT "$(agent_pid a)"
wait "$waiter5"
like "$(cat "$T/run-e.log")" 'assuming the slot of je is lost \(on-lost=term\)' "run says why it stopped the job"

# --- 4. a job that accepts and drops the agent's watches --------------------
# Once run is gone, the job alone holds the anchor; one that accepts on it
# and closes what it gets makes the agent watch again, a few times a second
# at most, while the slot stays held; it is released when the job ends.
cat >"$T/drop.py" <<'EOF'
import os, socket, sys, time
s = socket.socket(fileno=int(os.environ["FLEETSEM_ANCHOR_FD"]))
s.settimeout(0.1)
n, end = 0, time.monotonic() + 3
open(sys.argv[1] + ".pid", "w").write(str(os.getpid()))
while time.monotonic() < end:
    try:
        s.accept()[0].close()
        n += 1
    except socket.timeout:
        pass
open(sys.argv[1], "w").write(str(n))
EOF
fs_exec a run --slots 1 jf -- sh -c 'python3 "$0" "$1"; :' "$T/drop.py" "$T/dropped" &
run6=$!
check "the job holds" wait_for 5 test -s "$T/dropped.pid"
kill -KILL "$run6"
wait "$run6"
check "Redis: the job holds the slot while it drops watches" \
        wait_for 2 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{jf}:holders') = 1 ]"
is "$(no_wait b jf)" 75 "run --no-wait is refused"
check "the job ends after 3 s of dropping watches" wait_for 10 test -s "$T/dropped"
dropped=$(cat "$T/dropped" 2>/dev/null || echo none)
check "the agent made a few watches a second meanwhile, not more ($dropped in 3 s, at most 24)" [ "${dropped:-99}" -le 24 ]
check "Redis: the slot is free once the job ended" \
        wait_for 5 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{jf}:holders') = 0 ]"
done_testing
