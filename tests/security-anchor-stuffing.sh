#!/bin/bash
# Anchor stuffing: anyone may connect to a holder's anchor and close, until
# its backlog is full; the agent's watch connection then gets EAGAIN. An
# agent restart must not take that for a dead anchor: the slot is kept
# (watched by name), nobody else gets in, the holder runs undisturbed, and
# the slot goes once the holder ends. A new request whose anchor is full
# is granted and watched by name the same way.
TTL=2s
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-security.sh"

start_redis
start_agent a

fs a run --slots 1 stuffed -- sh -c 'while [ ! -f "$0" ]; do sleep 0.05; done; echo finished' "$T/go" \
        >"$T/victim.out" 2>"$T/victim.log" &
victim=$!
check "the victim holds" wait_for 5 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{stuffed}:holders') = 1 ]"
lease=$(rcli ZRANGE 'fleetsem:{stuffed}:holders' 0 -1)
grant=$(rcli HGET 'fleetsem:{stuffed}:grant' "$lease")

like "$(attack a stuff "$lease")" '^full after [0-9]+' "nobody fills the backlog of root's anchor"
kill -TERM "$(agent_pid a)"
wait "$(agent_pid a)"
is "$?" 0 "the agent exits cleanly on SIGTERM"
start_agent a
check "the new agent re-adopts the slot" wait_for 10 grep -q "Re-adopted 1 held slot" "$T/agent-a.log"
check "it watches the anchor by name" grep -q "watching it by name" "$T/agent-a.log"
sleep 3         # longer than the lease: a slot given up would be gone
is "$(rcli ZRANGE 'fleetsem:{stuffed}:holders' 0 -1)" "$lease" "Redis still lists the victim's lease"
is "$(rcli HGET 'fleetsem:{stuffed}:grant' "$lease")" "$grant" "with the same token"
fs a run --no-wait --slots 1 stuffed -- true 2>/dev/null
is "$?" 75 "a second job is refused (--no-wait: 75)"
check "the victim still runs" kill -0 "$victim"

touch "$T/go"
wait "$victim"
is "$?" 0 "the victim ends well"
is "$(cat "$T/victim.out")" finished "and ran its command to the end"
check "it never heard of a lost slot" sh -c "! grep -qiE 'lost the slot|slot (was )?lost' '$T/victim.log'"
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
sleep 3
is "$(holders stuffed2)" 1 "and kept past the lease"
exec {ASK[1]}>&-
wait "$ASK_PID"
check "released once its anchor closes" wait_for 5 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{stuffed2}:holders') = 0 ]"
done_testing
