#!/bin/bash
# Anchor stuffing: anyone may connect to a holder's anchor and close, until
# its backlog is full; the agent's watch connection then gets EAGAIN.
# fleetsem run drains its anchor, so there it never fills. Where nobody
# accepts (sessions, units), an agent restart must not take a full backlog
# for a dead anchor: the slot is kept (watched by name), nobody else gets
# in, the holder runs undisturbed, and the slot goes once the holder ends.
# A new request whose anchor is full is granted and watched by name too.
TTL=2s
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-security.sh"

start_redis
start_agent a

# fleetsem run takes every connection to its anchor and keeps only the
# agent's: nobody cannot fill its backlog at all.
fs a run --slots 1 runner -- sh -c 'while [ ! -f "$0" ]; do sleep 0.05; done' "$T/go-runner" 2>"$T/runner.log" &
runner=$!
check "a fleetsem run job holds" wait_for 5 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{runner}:holders') = 1 ]"
rlease=$(rcli ZRANGE 'fleetsem:{runner}:holders' 0 -1)
# (Whether nobody's loop ever finds the backlog full for a moment depends
# on who the scheduler runs; what matters is that it does not stay full.)
echo "# nobody's stuffing of fleetsem run's anchor: $(attack a stuff "$rlease")"
check "fleetsem run drains its anchor: a connection gets in after the attack" python3 -c "
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.setblocking(False)
s.connect('\0$NSBASE-a/lease/$rlease')"
kill -TERM "$(agent_pid a)"; wait "$(agent_pid a)"
start_agent a
check "a new agent re-adopts its slot" wait_for 10 grep -q "Re-adopted 1 held slot" "$T/agent-a.log"
agent_lacks a 'watching it by name' "with a watch connection, not by name"
touch "$T/go-runner"; wait "$runner"
is "$?" 0 "the job ends well"
check "its slot is released when it ends" wait_for 5 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{runner}:holders') = 0 ]"

# An anchor nobody accepts on, as a login session's or a unit's in the fd
# store: nobody fills its backlog, and an agent restart must still keep the
# slot, watching the anchor by name.
python3 "$(dirname "$0")/holder-raw.py" "$NSBASE-a" stuffed victim >"$T/victim.out" 2>"$T/victim.log" &
victim=$!
check "the victim holds" wait_for 5 grep -q held "$T/victim.out"
lease=$(rcli ZRANGE 'fleetsem:{stuffed}:holders' 0 -1)
grant=$(record stuffed "$lease" 4-5)

like "$(attack a stuff "$lease")" '^full after [0-9]+' "nobody fills the backlog of root's anchor"
kill -TERM "$(agent_pid a)"
wait "$(agent_pid a)"
is "$?" 0 "the agent exits cleanly on SIGTERM"
: >"$T/agent-a.log"
start_agent a
check "the new agent re-adopts the slot" wait_for 10 grep -q "Re-adopted 1 held slot" "$T/agent-a.log"
check "it watches the anchor by name" grep -q "watching it by name" "$T/agent-a.log"
check "Redis lists the victim's lease for longer than a lease (3 s): not given up" \
        still_after 3 sh -c "[ \"\$(redis-cli -s $REDIS_SOCK ZRANGE 'fleetsem:{stuffed}:holders' 0 -1)\" = '$lease' ]"
is "$(record stuffed "$lease" 4-5)" "$grant" "with the same token"
fs a run --no-wait --slots 1 stuffed -- true 2>/dev/null
is "$?" 75 "a second job is refused (--no-wait: 75)"
check "the victim still runs" kill -0 "$victim"
# (The victim reads nothing after its grant: the agent's journal and count
# say whether it lost its slot.)
agent_lacks a 'LOST slot of stuffed \(token' "the agent told of no lost slot of stuffed"
is "$(metric a fleetsem_lost_total)" 0 "... and the agent counts none lost"
kill -TERM "$victim"; wait "$victim"
check "its slot is released once its anchor's name is gone" \
        wait_for 5 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{stuffed}:holders') = 0 ]"

# A new request whose anchor's backlog is full (its owner filled it, or
# anyone did): granted, and watched by name.
printf 'allow = stuffed2 nobody\n' >"$T/agent.conf"
kill -TERM "$(agent_pid a)"; wait "$(agent_pid a)"
start_agent a --config "$T/agent.conf"
coproc ASK { attack a ask-stuffed stuffed2; }
read -r -t 20 reply <&"${ASK[0]}"
like "$reply" '^GRANTED ' "a request with a full backlog is granted"
is "$(holders stuffed2)" 1 "and held in Redis"
check "and kept for longer than a lease (3 s)" still_after 3 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{stuffed2}:holders') = 1 ]"
exec {ASK[1]}>&-
wait "$ASK_PID"
check "released once its anchor closes" wait_for 5 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{stuffed2}:holders') = 0 ]"
done_testing
