#!/bin/bash
# fleetsem metrics against two agents ("hosts") and Redis: the values equal
# what the test set up (holders, a waiter, denials, a release, a lease lost
# in Redis), promtool accepts the output, a user sees no lease id, Redis
# down and back is counted, and --output writes its file whole.
TTL=2s
. "$(dirname "$0")/lib.sh"
require promtool

start_redis
start_agent a
start_agent b

# m HOST: the metrics of HOST's agent. val TEXT SERIES: the value of SERIES
# (name and labels exactly as printed), "" when absent. (until_metric: lib.sh)
m() { fs "$1" metrics; }
val() { awk -v k="$2" '$1 == k { print $2 }' <<<"$1"; }

# --- known state ---------------------------------------------------------------
# m1: a holder on a, one on b, then a waiter on a (limit 2).
fs a run --slots 2 m1 -- sleep 600 &
check "a holds a slot of m1" wait_for 10 sh -c "[ \$(redis-cli -s $T/redis.sock ZCARD 'fleetsem:{m1}:holders') = 1 ]"
fs b run --slots 2 m1 -- sleep 600 &
check "b holds the other" wait_for 10 sh -c "[ \$(redis-cli -s $T/redis.sock ZCARD 'fleetsem:{m1}:holders') = 2 ]"
fs a run --slots 2 m1 -- sleep 600 &
check "a third waits on a" wait_for 10 sh -c "[ \$(redis-cli -s $T/redis.sock ZCARD 'fleetsem:{m1}:queue') = 1 ]"
waiting_since=$(date +%s.%N)
# Two denials on a: no wait (full), and a wait that runs out (timeout).
fs a run --slots 2 --no-wait m1 -- true 2>/dev/null
is "$?" 75 "no wait and no free slot: denied"
fs a run --slots 2 --wait 300ms m1 -- true 2>/dev/null
is "$?" 75 "no slot within the wait: denied"
# r1: held and ended (anchor closed).
fs a run --slots 1 r1 -- true
is "$?" 0 "r1 ran"
# rel: held (by a client that does not ask again), then given back on
# request by its lease id.
mkfifo "$T/rel.in"
python3 "$(dirname "$0")/many-slots.py" "$NSBASE-a" rel 1 <"$T/rel.in" >"$T/rel.out" &
exec 7>"$T/rel.in"
check "rel is held" wait_for 10 grep -qx 'granted 1' "$T/rel.out"
rel_id=$(rcli ZRANGE 'fleetsem:{rel}:holders' 0 -1)
like "$(raw a "RELEASE lease=$rel_id")" '^RELEASED held=1' "rel released on request"
# lost1: held, then its lease runs out in Redis (its expiry put in the
# past, as a host away too long leaves it): the next renewal finds it gone.
fs_exec a run --slots 1 lost1 -- sleep 600 &
lost_pid=$!
check "lost1 is held" wait_for 10 sh -c "[ \$(redis-cli -s $T/redis.sock ZCARD 'fleetsem:{lost1}:holders') = 1 ]"
rcli ZADD 'fleetsem:{lost1}:holders' XX 1 "$(rcli ZRANGE 'fleetsem:{lost1}:holders' 0 0)" >/dev/null
wait "$lost_pid"
is "$?" 75 "lost1's holder is told its slot is lost (exit 75)"

# --- the values -----------------------------------------------------------------
out=$(m a); rc=$?
is "$rc" 0 "fleetsem metrics exits 0"
promtool check metrics <<<"$out" >"$T/promtool.log" 2>&1
is "$?" 0 "promtool check metrics accepts it$( [ -s "$T/promtool.log" ] && echo ": $(head -c 300 "$T/promtool.log")")"
for series in \
        'fleetsem_redis_up 1' \
        'fleetsem_redis_reconnects_total 0' \
        'fleetsem_slots_held{name="m1",scope="host"} 1' \
        'fleetsem_slots_held{name="m1",scope="fleet"} 2' \
        'fleetsem_waiters{name="m1",scope="host"} 1' \
        'fleetsem_waiters{name="m1",scope="fleet"} 1' \
        'fleetsem_limit{name="m1",scope="fleet"} 2' \
        'fleetsem_grants_total{name="m1"} 1' \
        'fleetsem_grants_total{name="r1"} 1' \
        'fleetsem_grants_total{name="rel"} 1' \
        'fleetsem_grants_total{name="lost1"} 1' \
        'fleetsem_slots_held{name="r1",scope="fleet"} 0' \
        'fleetsem_releases_total{cause="anchor_closed"} 1' \
        'fleetsem_releases_total{cause="released"} 1' \
        'fleetsem_releases_total{cause="lost"} 1' \
        'fleetsem_denials_total{reason="timeout"} 1' \
        'fleetsem_denials_total{reason="full"} 1' \
        'fleetsem_lost_total 1' \
        'fleetsem_wait_seconds_count 4' \
        'fleetsem_wait_seconds_bucket{le="+Inf"} 4'; do
        is "$(val "$out" "${series% *}")" "${series##* }" "a: ${series% *} is ${series##* }"
done
is "$(grep -c '^fleetsem_limit{' <<<"$out")" 1 "no limit for names nobody holds or waits for"
# The oldest waiter's age: m1's has waited since it queued (the metrics
# were read after), nobody waits for r1.
oldest=$(val "$out" 'fleetsem_oldest_wait_seconds{name="m1"}')
upper=$(python3 -c "import time; print(time.time() - $waiting_since + 1)")
check "a: fleetsem_oldest_wait_seconds{name=\"m1\"} is how long its waiter has waited ($oldest s, under $upper)" \
        python3 -c "import sys; v = float(sys.argv[1]); sys.exit(not (0.2 < v < float(sys.argv[2])))" "$oldest" "$upper"
is "$(val "$out" 'fleetsem_oldest_wait_seconds{name="r1"}')" "" "a: no oldest wait for a name nobody asks for here"
like "$(val "$out" 'fleetsem_redis_rtt_seconds_count')" '^[1-9][0-9]*$' "renewal round trips are sampled"
check "the wait histogram's buckets never go down" awk '
        /^fleetsem_wait_seconds_bucket/ { if ($2 < last) exit 1; last = $2 } END { exit 0 }' <<<"$out"
out_b=$(m b)
is "$(val "$out_b" 'fleetsem_slots_held{name="m1",scope="host"}') $(val "$out_b" 'fleetsem_slots_held{name="m1",scope="fleet"}')" \
        "1 2" "b: m1 held 1 here, 2 fleet-wide"
is "$(val "$out_b" 'fleetsem_grants_total{name="m1"}') $(val "$out_b" 'fleetsem_waiters{name="m1",scope="host"}')" \
        "1 0" "b: 1 grant of m1, nobody waiting here"
is "$(val "$out_b" 'fleetsem_wait_seconds_count') $(val "$out_b" 'fleetsem_denials_total{reason="full"}')" \
        "1 0" "b counts its own waits and denials only"

# --- what a user may see ----------------------------------------------------------
user_out=
if prereq "root, setpriv and the user nobody (to ask as nobody)" sh -c '[ "$(id -u)" = 0 ] && command -v setpriv && id nobody'; then
        user_out=$(FLEETSEM_NAMESPACE=$NSBASE-a setpriv --reuid=nobody --regid=nogroup --clear-groups "$FLEETSEM" metrics)
        is "$?" 0 "any local user may ask (nobody)"
        is "$(val "$user_out" 'fleetsem_slots_held{name="m1",scope="fleet"}')" 2 "... and gets the same values"
fi
check "no lease id in the metrics" sh -c "! printf '%s' \"\$1\" | grep -qE '[0-9a-f]{32}'" - "$user_out$out"

# A name in Redis' index that is not a name: left out, the output still valid.
rcli ZADD fleetsem:names "$(now_ms)" 'bad"name\x' >/dev/null
out=$(m a)
check "a malformed name from Redis is left out" sh -c "! printf '%s' \"\$1\" | grep -q 'bad'" - "$out"
promtool check metrics <<<"$out" >/dev/null 2>&1
is "$?" 0 "promtool still accepts it"

# --- --output: whole files, 0644 -----------------------------------------------------
mkdir -p "$T/textfile"
prom=$T/textfile/fleetsem.prom
(umask 077 && fs a metrics --output "$prom")
is "$?" 0 "--output FILE exits 0"
is "$(stat -c %a "$prom")" 644 "the file is 0644 whatever the umask"
promtool check metrics <"$prom" >/dev/null 2>&1
is "$?" 0 "promtool accepts the file"
is "$(val "$(cat "$prom")" 'fleetsem_slots_held{name="m1",scope="fleet"}')" 2 "the file holds the values"
# A reader never sees a part: every read while it is rewritten ends with
# the last line.
touch "$T/reading"
(
        n=0 bad=0
        while [ -f "$T/reading" ]; do
                last=$(tail -n 1 "$prom")
                n=$((n + 1))
                [[ $last == fleetsem_renewal_lateness_seconds_count* ]] || bad=$((bad + 1))
        done
        echo "$n $bad" >"$T/reads"
) &
reader=$!
for i in $(seq 30); do fs a metrics --output "$prom" || break; done
is "$i" 30 "rewritten 30 times"
rm -f "$T/reading"
wait "$reader"
read -r n_reads n_bad <"$T/reads"
is "$n_bad" 0 "no read of $n_reads saw a partial file"
is "$(ls -A "$T/textfile")" "fleetsem.prom" "no temporary file left behind"
fs a metrics --output "$T/no-such-dir/fleetsem.prom" 2>/dev/null
is "$?" 73 "a directory that does not exist: exit 73"

# --- Redis down and back ----------------------------------------------------------------
FLEETSEM_NAMESPACE=$NSBASE-nobody-listens "$FLEETSEM" metrics 2>/dev/null
is "$?" 69 "no agent: exit 69"
fs a metrics extra 2>/dev/null
is "$?" 64 "an argument: exit 64"
stop_redis
check "Redis stopped: fleetsem_redis_up 0" until_metric a fleetsem_redis_up 0
out=$(m a); rc=$?
is "$rc" 0 "metrics without Redis still exit 0"
printf '%s\n' "$out" >"$T/metrics-down"
log_lacks "$T/metrics-down" '^fleetsem_.*scope="fleet"' '^fleetsem_redis_up 0$' "... without fleet-wide values"
like "$(val "$out" 'fleetsem_slots_held{name="m1",scope="host"}')" '^[01]$' "... with this host's"
promtool check metrics <<<"$out" >/dev/null 2>&1
is "$?" 0 "promtool accepts it without Redis"
start_redis
check "Redis back: fleetsem_redis_up 1" until_metric a fleetsem_redis_up 1
is "$(val "$(m a)" fleetsem_redis_reconnects_total)" 1 "the reconnection is counted"

done_testing
