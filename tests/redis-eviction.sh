#!/bin/bash
# A Redis that may evict fleetsem's keys (a maxmemory-policy other than
# noeviction) grants nothing new: an agent started against one refuses
# requests with code=misconfigured (whatever on_error says) and the setting to change; one whose Redis
# is switched to volatile-lru while it runs notices within seconds, fails
# its waiters the same way and keeps renewing the slot held before; status,
# its JSON, the metrics and the sd_notify STATUS= line show it, the journal
# says it once; set back to noeviction, the agent grants again within
# seconds.
TTL=2s
. "$(dirname "$0")/lib.sh"

policy() { rcli CONFIG GET maxmemory-policy | tail -n 1; }
evicts() { metric "$1" "fleetsem_redis_evicts{policy=\"$2\"}"; }
evicts_is() { [ "$(evicts "$1" "$2")" = 1 ]; }
not_evicts() { metric_is "$1" fleetsem_redis_evicts 0; }
# The expiry of the lease that holds NAME, in Redis (ms).
holder_expiry() { rcli ZRANGE "fleetsem:{$1}:holders" 0 -1 WITHSCORES | sed -n 2p; }
expiry_after() { [ "$(holder_expiry "$1")" -gt "$2" ] 2>/dev/null; }

# An agent that starts against an evicting Redis refuses from the start.
start_redis --maxmemory-policy allkeys-lru
is "$(policy)" allkeys-lru "Redis runs with allkeys-lru"
out=$("$FLEETSEMD" --redis "unix:$REDIS_SOCK" --check-redis 2>&1); rc=$?
is "$rc" 1 "fleetsemd --check-redis: 1 against it"
like "$out" "Redis at unix:$REDIS_SOCK runs with maxmemory-policy allkeys-lru, which may evict fleetsem's keys: .*CONFIG SET maxmemory-policy noeviction" \
        "... naming the setting and the fix"
# The agent's sd_notify messages, as systemd would get them.
notify_listen "$T/notify" "$T/notify.log" || bail "no notify socket"
NOTIFY_SOCKET=$T/notify start_agent a
check "a refuses: fleetsem_redis_evicts{policy=\"allkeys-lru\"} 1" wait_for 10 evicts_is a allkeys-lru
check "its STATUS= line says it grants nothing, and why" wait_for 5 grep -q \
        "^STATUS=0 slot(s) held, 0 waiting, Redis up; GRANTING NOTHING: Redis at .* runs with maxmemory-policy allkeys-lru" \
        "$T/notify.log"
out=$(python3 "$(dirname "$0")/anchor-ask.py" "$NSBASE-a" "$(printf '%032x' 1)" e 2)
like "$out" '^ERROR code=misconfigured message=Redis%20at%20.*%20runs%20with%20maxmemory-policy%20allkeys-lru,%20which%20may%20evict%20fleetsem%27s%20keys:%20nothing%20is%20granted%20until%20it%20is%20noeviction%20%28CONFIG%20SET%20maxmemory-policy%20noeviction,%20and%20in%20redis.conf%29$' \
        "a request is refused with code=misconfigured, naming maxmemory-policy and the fix"
err=$(fs a run --slots 2 e -- true 2>&1); rc=$?
is "$rc" 78 "fleetsem run is refused: 78"
like "$err" 'maxmemory-policy allkeys-lru' "... and says why"
is "$(holders e) $(waiters e)" "0 0" "Redis: nobody holds or waits for e"
is "$(grep -c "runs with maxmemory-policy allkeys-lru, which may evict" "$T/agent-a.log")" 1 \
        "the journal says so once, not once per request"

rcli CONFIG SET maxmemory-policy noeviction >/dev/null
out=$("$FLEETSEMD" --redis "unix:$REDIS_SOCK" --check-redis 2>&1); rc=$?
is "$rc" 0 "fleetsemd --check-redis: 0 once it is noeviction"
like "$out" "maxmemory-policy noeviction" "... and says so"
start=$(now_ms)
check "set to noeviction, a request is granted again within 10 s" \
        wait_for 10 fs a run --slots 2 --no-wait e -- true
check "... (took $(( $(now_ms) - start )) ms) and the metric is 0" not_evicts a
check "... and STATUS= no longer says so" wait_for 5 sh -c "[ \"\$(grep '^STATUS=' '$T/notify.log' | tail -n 1)\" = 'STATUS=0 slot(s) held, 0 waiting, Redis up' ]"
check "the journal says slots are granted again" \
        grep -q "runs with maxmemory-policy noeviction now: slots are granted again" "$T/agent-a.log"

# A holder and a waiter from before the policy changes.
tagged_job a e h1 --slots 1 & h1=$!
check "h1 holds the slot of e" wait_for 10 grep -qx 'enter h1' "$T/order"
tagged_job a e w1 --slots 1 & w1=$!
check "w1 waits behind it" wait_for 10 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{e}:queue') = 1 ]"

rcli CONFIG SET maxmemory-policy volatile-lru >/dev/null
start=$(now_ms)
check "switched to volatile-lru while a runs: noticed within 10 s" wait_for 10 evicts_is a volatile-lru
echo "# noticed after $(( $(now_ms) - start )) ms"
wait "$w1"; rc=$?
is "$rc" 78 "the waiter w1 is told (78)"
check "... why" grep -q 'maxmemory-policy volatile-lru, which may evict' "$T/run-w1.err"
is "$(waiters e)" 0 "... and left the queue in Redis"
log_lacks "$T/order" '^enter w1$' '^enter h1$' "w1 never ran"

# The holder keeps its slot: still in Redis, its lease renewed.
exp=$(holder_expiry e)
check "h1's lease is renewed in Redis after the change" wait_for 10 expiry_after e "$exp"
check "h1 runs on" kill -0 "$h1"
is "$(holders e)" 1 "Redis: e has 1 holder"
st=$(fs a status e)
like "$st" '^e: 1 held, 0 waiting' "status: e 1 held"
like "$st" 'No slot is granted: Redis at .* runs with maxmemory-policy volatile-lru, which may evict' \
        "status says nothing is granted, and why"
like "$(fs a status --json e)" '"evicts":\{"policy":"volatile-lru","message":"Redis at [^"]* runs with maxmemory-policy volatile-lru, [^"]*"\}' \
        "... and its JSON"
err=$(fs a run --slots 5 --no-wait other -- true 2>&1); rc=$?
is "$rc:$(holders other)" "78:0" "a new request for another name is refused too"

rcli CONFIG SET maxmemory-policy noeviction >/dev/null
start=$(now_ms)
check "set back to noeviction: a request is granted within 10 s" \
        wait_for 10 fs a run --slots 5 --no-wait other -- true
echo "# granted after $(( $(now_ms) - start )) ms"
like "$(fs a status --json e)" '"evicts":null' "status --json: evicts null"
is "$(grep -c "runs with maxmemory-policy noeviction now: slots are granted again" "$T/agent-a.log")" 2 \
        "the journal says it once each time"
touch "$T/go-h1"
wait "$h1"
is "$(holders e) $(waiters e)" "0 0" "all released"
done_testing
