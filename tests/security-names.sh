#!/bin/bash
# Names: nobody, allowed names atk*, makes names as fast as it can. It holds
# at most max_names_per_user (64) at once, the rest refused with code=limit;
# what it made leaves Redis within 10 minutes, not a day, also when it held
# them across a renewal (a root's name so held stays the day of idle_time);
# and another host's metrics cost what that host uses, not every name in
# Redis.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-security.sh"

printf 'allow = atk* nobody\n' >"$T/agent.conf"
start_redis
start_agent a --config "$T/agent.conf"
start_agent b
fs b run --slots 1 b-own -- true
is "$?" 0 "host b uses a name of its own"

coproc NAMES { attack a names 200 atk 0; }
replies=$(replies "${NAMES[0]}")
granted=$(sed -n 's/^GRANTED \([0-9]*\)$/\1/p' <<<"$replies")
limited=$(grep -c "^ERROR code=limit message=uid $NOBODY_UID holds or waits for 64 other names on this host already (max_names_per_user) " <<<"$replies")
is "$granted" 64 "nobody holds 64 names at once"
is "$limited" 1 "the others are refused with code=limit, saying why"
held=$(rcli --scan --pattern 'fleetsem:{atk*}:holders' | wc -l)
is "$held" 64 "Redis holds 64 of its names"
out=$(as_nobody env FLEETSEM_NAMESPACE="$NSBASE-a" "$FLEETSEM" run --slots 1 atk-more -- true 2>&1)
is "$?" 77 "fleetsem run past the cap exits 77 (EX_NOPERM) without running${out:+: $out}"
# Held across a renewal tick: a holder's expiry in Redis (its score) moves on.
renewed() { local s; s=$(rcli ZSCORE "$1" "$2"); [ -n "$s" ] && [ "${s%.*}" -gt "${3%.*}" ]; }
k=$(rcli --scan --pattern 'fleetsem:{atk*}:holders' | head -n 1)
m=$(rcli ZRANGE "$k" 0 0)
s0=$(rcli ZSCORE "$k" "$m")
check "nobody's names are renewed while it holds them ($k)" wait_for 10 renewed "$k" "$m" "$s0"
exec {NAMES[1]}>&-
wait "$NAMES_PID"
check "its names are released once its anchors close" wait_for 10 sh -c "[ -z \"\$(redis-cli -s $REDIS_SOCK --scan --pattern 'fleetsem:{atk*}:holders')\" ]"

# Five more rounds of 64 new names, one after another.
for r in 1 2 3 4 5; do
        coproc NAMES { attack a names 64 atk $((r * 1000)); }
        replies "${NAMES[0]}" >/dev/null
        exec {NAMES[1]}>&-
        wait "$NAMES_PID"
done
keys=$(rcli --scan --pattern 'fleetsem:{atk*' | wc -l)
total=$(rcli DBSIZE)
echo "# after 384 names made and let go: $keys keys of them in Redis, $total in all"
check "at most 4 keys a name are left of them ($keys for 384 names)" test "$keys" -le $((384 * 4))
ttls=$(rcli --scan --pattern 'fleetsem:{atk*' | while read -r k; do rcli PTTL "$k"; done | sort -n)
ttl_min=$(head -n 1 <<<"$ttls") ttl_max=$(tail -n 1 <<<"$ttls")
check "every one of them leaves Redis within 10 minutes (${ttl_min}ms to ${ttl_max}ms)" \
        test "${ttl_min:--1}" -gt 0 -a "${ttl_max:-0}" -le 600000
# However long the lease, a name's keys outlive its renewal ticks: with
# lease_ttl 40m, the keys of nobody's name live twice that from its last
# use, not the 10 minutes of a short lease (its next renewal would find
# them gone, and the name granted anew to others).
TTL=40m start_agent c --config "$T/agent.conf"
out=$(as_nobody env FLEETSEM_NAMESPACE="$NSBASE-c" "$FLEETSEM" run --slots 1 atk-long -- true 2>&1)
is "$?" 0 "nobody runs a job on host c (lease_ttl 40m)${out:+: $out}"
ttl=$(rcli PTTL 'fleetsem:{atk-long}:clock')
# headroom: no deadline: a time to live Redis counts down from 80 min;
# it read 40 ms less (4799960 ms) a few ms after it was set, and 100 s
# less (4700000) would take 2500 times that.
check "its name lives in Redis twice the lease, 80 minutes (${ttl}ms)" test "$ttl" -gt 4700000 -a "$ttl" -le 4800000
# Root's name, held across a renewal the same way, then let go: idle_time.
fs_exec a run --slots 1 root-own -- sleep 300 &
root_job=$!
check "root holds root-own" wait_for 10 sh -c "[ \"\$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{root-own}:holders')\" = 1 ]"
m=$(rcli ZRANGE 'fleetsem:{root-own}:holders' 0 0)
s0=$(rcli ZSCORE 'fleetsem:{root-own}:holders' "$m")
check "... and it is renewed" wait_for 10 renewed 'fleetsem:{root-own}:holders' "$m" "$s0"
kill "$root_job"
wait "$root_job"
check "... released once its job is gone" wait_for 10 sh -c "[ \"\$(redis-cli -s $REDIS_SOCK EXISTS 'fleetsem:{root-own}:holders')\" = 0 ]"
ttl=$(rcli PTTL 'fleetsem:{root-own}:clock')
# headroom: no deadline: a day's time to live, read under a second after
# it was set (86399837 ms), against 10 min.
check "root's name stays in Redis the day of idle_time (${ttl}ms)" test "$ttl" -gt 600000

# Host b's metrics beside nobody's names on host a: as quick as the start
# of a process of ours (probe: fleetsem --version beside each), 100 times
# (the p99 of 100 is not the slowest one alone).
rc=0
for _ in $(seq 100); do probe fs b metrics || rc=$?; done
is "$rc" 0 "root's metrics on host b succeed, 100 times"
probe_verdict "root's metrics on host b"
out=$(fs b metrics)
like "$out" 'fleetsem_slots_held\{name="b-own",scope="fleet"\} 0' "host b's metrics give the fleet's figures of its own name"
check "... and none of nobody's names on host a" sh -c "! printf '%s' \"\$1\" | grep -q 'name=\"atk'" - "$out"
done_testing
