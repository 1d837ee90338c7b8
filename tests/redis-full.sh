#!/bin/bash
# Redis full of another tenant's keys (past its maxmemory, noeviction):
# the holders keep their slots (their renewals and releases run: keep.lua,
# renew.lua and release.lua may run when Redis is out of memory), and
# status and metrics answer (status.lua, counts.lua too); new requests, and
# the waiters from before at their next check, are refused with
# code=unavailable (the on_error class of an unreachable Redis) and words
# that say Redis is full; once memory is freed, slots are granted again.
TTL=2s
. "$(dirname "$0")/lib.sh"

# The expiry of the lease that holds NAME, in Redis (ms).
holder_expiry() { rcli ZRANGE "fleetsem:{$1}:holders" 0 -1 WITHSCORES | sed -n 2p; }
expiry_after() { [ "$(holder_expiry "$1")" -gt "$2" ] 2>/dev/null; }
used() { rcli INFO memory | tr -d '\r' | sed -n 's/^used_memory:\([0-9]*\)$/\1/p'; }
full() { [ "$(rcli SET app:probe x 2>&1)" != OK ]; }

start_redis --maxmemory-policy noeviction
start_agent a
start_agent b

tagged_job a held h1 --slots 1 & h1=$!
check "h1 holds the slot of held (host a)" wait_for 10 grep -qx 'enter h1' "$T/order"
tagged_job b held w1 --slots 1 & w1=$!
check "w1 waits behind it (host b)" wait_for 10 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{held}:queue') = 1 ]"

# Another tenant: 2 MB of keys of its own, then a maxmemory under what
# Redis holds, as when that tenant grows past it.
val=$(head -c 2000 /dev/zero | tr '\0' x)
for i in $(seq 1 1000); do echo "SET app:fill:$i $val"; done | rcli >/dev/null
is "$(rcli DBSIZE)" "$(( $(rcli KEYS 'fleetsem*' | wc -l) + 1000 ))" "the tenant wrote its 1000 keys"
rcli CONFIG SET maxmemory $(( $(used) - 512 * 1024 )) >/dev/null
like "$(rcli SET app:probe x 2>&1)" "^OOM " "Redis is full: another client's write is refused with OOM"

# New requests: refused, saying Redis is full, in the class of a Redis
# that cannot count (code=unavailable, exit 69: on_error decides).
out=$(python3 "$(dirname "$0")/anchor-ask.py" "$NSBASE-b" "$(printf '%032x' 7)" fresh 1)
like "$out" '^ERROR code=unavailable message=Redis%20is%20full%20%28its%20used%20memory%20is%20past%20its%20maxmemory%29:%20no%20new%20slot%20can%20be%20counted' \
        "a new request: ERROR code=unavailable, saying Redis is full"
err=$(fs b run --slots 1 fresh -- true 2>&1); rc=$?
is "$rc" 69 "fleetsem run on a new name is refused: 69"
like "$err" "Redis is full" "... saying Redis is full"
is "$(holders fresh)" 0 "Redis: nobody holds fresh"

# The holder keeps its slot: renewed in Redis lease after lease.
exp=$(holder_expiry held)
check "h1's lease is renewed in Redis while it is full" wait_for 10 expiry_after held "$exp"
exp=$(holder_expiry held)
check "... and again" wait_for 10 expiry_after held "$exp"
check "Redis is still full" full
check "h1 runs on, 3 leases after Redis filled" still_after 6 kill -0 "$h1"
is "$(metric a fleetsem_lost_total)" 0 "metrics answer while Redis is full: host a lost nothing"
like "$(fs a status held)" '^held: 1 held, 0 waiting' "status answers: held 1 held"

# The waiter from before: refused at its next check, as a new request.
wait "$w1"; rc=$?
is "$rc" 69 "the waiter w1 is told (69)"
check "... that Redis is full" grep -q 'Redis is full' "$T/run-w1.err"
is "$(holders held) $(waiters held)" "1 0" "Redis: held has its holder, and nobody waits"

# A release runs too.
touch "$T/go-h1"
wait "$h1"; rc=$?
is "$rc" 0 "h1 ends (0)"
check "its release runs: nobody holds held in Redis" wait_for 10 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{held}:holders') = 0 ]"
check "Redis is still full" full
is "$(metric a fleetsem_lost_total) $(metric b fleetsem_lost_total)" "0 0" "no host lost a slot"
log_lacks "$T/order" '^enter w1$' '^enter h1$' "w1 never ran"

# Memory freed: granted again.
rcli CONFIG SET maxmemory 0 >/dev/null
check "memory freed, a request is granted again within 10 s" wait_for 10 fs b run --slots 1 --no-wait fresh -- true

done_testing
