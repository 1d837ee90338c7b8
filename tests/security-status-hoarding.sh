#!/bin/bash
# STATUS hoarding: nobody opens 1000 connections asking STATUS for every
# name (4 names of 300 holders: more than the socket buffers hold) and
# never reads. The agent stays small, drops the readers that make no
# progress, and serves root meanwhile.
TTL=5s
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-security.sh"

start_redis
start_agent a
pid=$(agent_pid a)
# hold NAME COUNT: COUNT holders of NAME in one process, until $T/go-NAME
# is written to.
hold() {
        mkfifo "$T/go-$1"
        python3 "$(dirname "$0")/many-slots.py" "$NSBASE-a" "$1" "$2" <"$T/go-$1" >"$T/hold-$1.out" 2>&1 &
        exec {fd}>"$T/go-$1"
        eval "GO_$1=$fd"
}
for n in 1 2 3 4; do hold "big$n" 300; done
for n in 1 2 3 4; do
        check "300 holders of big$n" wait_for 60 grep -q "granted 300" "$T/hold-big$n.out"
done
base_fds=$(fds "$pid")
echo "# agent fds with the holders: $base_fds"
rss_before=$(rss_kb "$pid")

coproc HOARD { attack a hoard 1000; }
read -r -t 60 asked <&"${HOARD[0]}"
like "$asked" '^asked [0-9]+' "nobody asks STATUS on many connections and reads nothing ($asked)"
peak=0
for i in $(seq 1 40); do
        r=$(rss_kb "$pid"); [ "$r" -gt "$peak" ] && peak=$r
        sleep 0.25      # not synchronisation: the agent's RSS sampled for 10 s
done
echo "# agent RSS: ${rss_before} KiB before, peak ${peak} KiB during the hoarding"
# Under ASan (the sanitizer pass) every allocation carries redzones and
# quarantine: there the bound is on what the attack added, not the total.
if grep -q libasan "/proc/$pid/maps" 2>/dev/null; then
        check "the attack adds less than 64 MiB to the agent (ASan build: ${rss_before} -> ${peak} KiB)" \
                test $((peak - rss_before)) -lt 65536
else
        check "the agent stays under 64 MiB" test "$peak" -lt 65536
fi
ms=$(ms_of fs a status big1)
is "$?" 0 "root's status is still answered"
echo "# root's status took ${ms}ms"
ms=$(ms_of fs a run --slots 1 hoard-root -- true)
is "$?" 0 "root's run still succeeds"
echo "# root's run took ${ms}ms"
check "the agent says it refuses or drops them" wait_for 15 grep -qE "uid $NOBODY_UID\)" "$T/agent-a.log"
check "readers without progress are dropped within 10s (and a few): the agent holds what it held before" \
        wait_for 15 sh -c "[ \$(ls /proc/$pid/fd | wc -l) -le $((base_fds + 5)) ]"
is "$(metric a fleetsem_lost_total)" 0 "no holder lost its slot meanwhile (the agent's count)"
for n in 1 2 3 4; do is "$(holders "big$n")" 300 "big$n still has its 300 holders"; done
echo "# agent RSS after: $(rss_kb "$pid") KiB, fds $(fds "$pid")"
exec {HOARD[1]}>&-
wait "$HOARD_PID"

# The same rule for root: a status it does not read goes after 10s.
t0=$(now_ms)
sleep 30 | python3 "$ATTACK" "$NSBASE-a" hoard 1 >/dev/null &
check "root's own unread status is dropped too" \
        wait_for 20 grep -qE "Dropping client pid [0-9]+ \(uid 0\): it read nothing" "$T/agent-a.log"
echo "# dropped after $(( $(now_ms) - t0 ))ms"
for n in 1 2 3 4; do eval "exec {GO_big$n}>&-"; done
done_testing
