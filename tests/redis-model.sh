#!/bin/bash
# The data model marker (fleetsem:model, "N V"): an agent refuses a Redis
# that holds a newer data model than its own, with a message that says
# which and what to do (the request refused as misconfigured, status, the journal once),
# and serves once the marker is gone, within its reconnection backoff
# (2 s); where there is none it writes its own.
TTL=3s
. "$(dirname "$0")/lib.sh"

start_redis
rcli SET fleetsem:model "99 9.9" >/dev/null
epoch=$(rcli GET fleetsem:epoch)
start_agent a
check "an agent of model 2 takes a Redis of model 99 for down" wait_for 10 redis_state_is a down
MSG='Redis at [^ ]+ holds fleetsem data model 99 \(fleetsem >= 9\.9\); this agent speaks 2: upgrade this agent; see fleetsemd\(8\) UPGRADING'
out=$(fs a run --slots 1 --no-wait m1 -- true 2>&1); rc=$?
is "$rc" 78 "a request is refused as misconfigured (exit 78)"
like "$out" "$MSG" "... saying which data model, which fleetsem, and what to do"
out=$(fs a status 2>&1)
like "$out" "$MSG" "status shows it"
like "$(raw a STATUS)" '^ERROR code=misconfigured ' "... with the error code misconfigured"
is "$(rcli GET fleetsem:model) / $(rcli GET fleetsem:epoch)" "99 9.9 / $epoch" "the agent changed neither the marker nor the epoch"
# Three rounds of the agent's reconnection (a command and a pub/sub
# connection each), then its journal: said once.
conns() { rcli INFO stats | tr -d '\r' | sed -n 's/^total_connections_received://p'; }
c0=$(conns)
check "the agent looks again (connects again)" wait_for 15 sh -c "[ \$(redis-cli -s $REDIS_SOCK INFO stats | tr -d '\r' | sed -n 's/^total_connections_received://p') -ge $((c0 + 6)) ]"
is "$(grep -cE "$MSG" "$T/agent-a.log")" 1 "the journal says it once"
is "$(redis_state a)" down "... and the agent still grants nothing"

rcli DEL fleetsem:model >/dev/null
t0=$(now_ms)
check "the marker removed: the agent serves within 3 s" wait_for 3 redis_state_is a up
echo "# up after $(( $(now_ms) - t0 )) ms"
is "$(rcli GET fleetsem:model)" "2 0.2" "... and writes its own marker"
fs a run --slots 1 --no-wait m1 -- true
is "$?" 0 "a request is granted"
check "the journal says it serves again" grep -q "holds this agent's data model (2) again" "$T/agent-a.log"

# An older marker (the first data model's) is upgraded at connect.
rcli SET fleetsem:model "1 0.1" >/dev/null
kill -TERM "$(agent_pid a)"; wait "$(agent_pid a)"
start_agent a
check "an agent started on a marker of model 1 serves" wait_for 10 redis_state_is a up
is "$(rcli GET fleetsem:model)" "2 0.2" "... having upgraded the marker"
done_testing
