#!/bin/bash
# Memory: nobody, allowed pin-*, takes and gives back fresh 200-byte names
# as fast as the agent lets it, for FLOOD_SECONDS (default 45 s: four and a
# half times the 10 s its names stay in Redis here, so the names index is
# trimmed of the first ones and the cap frees up again several times over,
# some 1280 names made; the whole test takes about a minute. The names'
# life is two ninths of a flood shorter than 90 s, 20 s from there on:
# FLOOD_SECONDS=600 floods for ten minutes, thirty lives).
# Redis' used_memory stays under the bound fleetsemd(8) (LIMITS, Sizing Redis) gives for
# one user, computed from this configuration: max_redis_names_per_user
# names of NAME_BYTES each, max_leases_per_user slots of SLOT_BYTES each,
# over what Redis held before; nobody is refused past the cap with
# code=limit, counted in fleetsem_names_refused_total; the names index
# never holds more than twice the cap; and once it stops, its names, their
# index entries and census entries and the index and the census themselves
# leave Redis, and used_memory falls back to what it was before.
TTL=2s
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-security.sh"

FLOOD_SECONDS=${FLOOD_SECONDS:-45}
# idle_time: a user's name's life in Redis (more than twice the lease).
LIFE=20
[ "$FLOOD_SECONDS" -ge 90 ] || LIFE=$((FLOOD_SECONDS * 2 / 9))
[ "$LIFE" -ge 5 ] || bail "FLOOD_SECONDS=$FLOOD_SECONDS: at least 23 (a name's life of 5 s at least)"
CAP=256                 # max_redis_names_per_user, its default
LEASES=256              # max_leases_per_user, its default
LEN=200                 # the longest name
# fleetsemd(8), LIMITS, Sizing Redis: what a name nobody holds costs Redis (800 bytes and
# 4.5 a byte of the name), and a held slot (1000 bytes); Redis' own
# buffers for the agent's connections and the test's own, 1 MiB.
NAME_BYTES=$((800 + LEN * 9 / 2))
SLOT_BYTES=1000
SLACK=$((1024 * 1024))

printf 'allow = pin-* nobody\nidle_time = %ss\nmax_redis_names_per_user = %s\nmax_leases_per_user = %s\n' \
        "$LIFE" "$CAP" "$LEASES" >"$T/agent.conf"
start_redis
start_agent a --config "$T/agent.conf"
used() { rcli INFO memory | tr -d '\r' | sed -n 's/^used_memory:\([0-9]*\)$/\1/p'; }
# Redis' Lua heap of the functions (part of used_memory): its garbage is
# collected as scripts run, not once they stop.
lua_heap() { rcli INFO memory | tr -d '\r' | sed -n 's/^used_memory_vm_functions:\([0-9]*\)$/\1/p'; }
# What fleetsem's keys take in Redis, each as MEMORY USAGE says.
keys_bytes() {
        local k b n=0
        for k in $(rcli --scan --pattern 'fleetsem:*'); do
                int_of b "$(rcli MEMORY USAGE "$k")"
                n=$((n + b))
        done
        echo "$n"
}
fs a run --slots 1 root-own -- true
is "$?" 0 "root uses a name of its own"
base=$(used)
int_of heap0 "$(lua_heap)"
int_of kb0 "$(keys_bytes)"
bound=$((base + CAP * NAME_BYTES + LEASES * SLOT_BYTES + SLACK))
echo "# Redis before: $base bytes; the bound: $bound bytes ($CAP names of $NAME_BYTES, $LEASES slots of $SLOT_BYTES, $SLACK)"

# What Redis holds while nobody floods, a sample every 0.2 s (a poll, not
# a synchronisation): used_memory and the names index's size.
sample() {
        while echo "$(now_ms) $(used) $(rcli ZCARD fleetsem:names)" && [ ! -e "$T/stop-sampling" ]; do sleep 0.2; done >"$T/samples"
}
sample & sampler=$!
start=$(now_ms)
out=$(attack a churn "$FLOOD_SECONDS" pin- "$LEN")
flood_end=$(now_ms)
echo "$out" | sed 's/^/# reply: /'
made=$(sed -n 's/^made //p' <<<"$out")
echo "# nobody made $made names in $(( (flood_end - start) / 1000 )) s"
check "nobody made names past the cap again and again ($made > 2 x $CAP)" test "${made:-0}" -gt $((2 * CAP))
like "$out" "ERROR code=limit message=uid $NOBODY_UID has $CAP names in Redis from this host already, each kept there for ${LIFE}s after its last use \\(max_redis_names_per_user\\); use one of them, or wait [0-9]+" \
        "past the cap, nobody is refused with code=limit, saying why"
refused=$(grep -o '^ERROR code=limit .* [0-9]*$' <<<"$out" | awk '{ print $NF }')
is "$(metric a fleetsem_names_refused_total)" "$refused" "fleetsem_names_refused_total counts each refusal ($refused)"

int_of peak "$(awk '{ if ($2 > m) m = $2 } END { printf "%d\n", m }' "$T/samples")"
int_of index_peak "$(awk '{ if ($3 > m) m = $3 } END { printf "%d\n", m }' "$T/samples")"
# The last third of the flood against the whole: it levelled off.
int_of last_third "$(awk -v t=$((start + (flood_end - start) * 2 / 3)) '$1 >= t { if ($2 > m) m = $2 } END { printf "%d\n", m }' "$T/samples")"
echo "# used_memory: peak $peak bytes, $last_third in the flood's last third; the names index: at most $index_peak names"
check "Redis' used_memory stays under the bound ($peak <= $bound)" test "$peak" -le "$bound"
check "... in the flood's last third as well ($last_third <= $bound)" test "$last_third" -le "$bound"
# An entry past leaves at the next write or read of the index (or with
# the key, at its latest entry's time): besides the names in Redis, those
# that left since (fleetsemd(8), LIMITS), so at most twice the cap.
check "the names index holds at most twice the cap and root's name ($index_peak <= $((2 * CAP + 1)))" \
        test "$index_peak" -le $((2 * CAP + 1))

# Stopped: its names leave Redis, and so do their entries and the index.
gone() { [ -z "$(rcli --scan --pattern 'fleetsem:{pin-*')" ]; }
check "nobody's names leave Redis within their life and a lease" wait_for $((LIFE + 10)) gone
check "... and the names index with them (root's went before)" wait_for 10 sh -c "[ \"\$(redis-cli -s $REDIS_SOCK EXISTS fleetsem:names)\" = 0 ]"
# ... and the census, which expires with its latest entry (its last name):
# what stays is the per-Redis keys that never expire (epoch, model, fleet
# clock), without a call of anyone's.
check "... and the census with its last name" wait_for 10 sh -c "[ \"\$(redis-cli -s $REDIS_SOCK EXISTS fleetsem:census)\" = 0 ]"
is "$(rcli DBSIZE)" 3 "only the per-Redis keys that never expire are left: epoch, model, fleet clock"
# fleetsem's keys take no more than before the flood (when root's name,
# its census entry and its index entry were there besides).
int_of kb1 "$(keys_bytes)"
check "fleetsem's keys take no more of Redis than before the flood ($kb1 <= $kb0 bytes)" test "$kb1" -le "$kb0"
# used_memory, less what Redis' Lua heap grew by (its garbage, collected
# at later calls), falls back by a quarter of what the flood added at
# least. Not by all of it: what stays is Redis' own (its allocator's and
# tables' memory after thousands of keys came and went, half of what the
# flood added on 2 cores), none of it fleetsem's data, which the check
# above holds to its baseline.
fell() {
        local u h
        int_of u "$(used)"
        int_of h "$(lua_heap)"
        [ $((u - (h - heap0))) -le $((base + (peak - base) * 3 / 4)) ]
}
check "used_memory, less the Lua heap's garbage, falls back by a quarter of what the flood added ($base bytes; peak $peak)" \
        wait_for 10 fell
echo "# used_memory after: $(used) bytes (Lua heap $(lua_heap), $heap0 before), before the flood: $base bytes; fleetsem's keys $kb1 bytes, $kb0 before"
touch "$T/stop-sampling"
wait "$sampler"
done_testing
