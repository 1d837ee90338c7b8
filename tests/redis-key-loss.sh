#!/bin/bash
# Every key of src/agent/library/keys.list lost alone (DEL), at each moment
# that matters, under a holder on host a and a waiter on host b of a name
# of one slot, the two agents sharing one redis-server:
#   held     a `fleetsem run` holder (its default --on-lost: a slot told
#            lost ends its job) and b's waiter; the key deleted;
#   quiet    the same after a quiet spell: both agents stopped for more
#            than half a lease before a takes its slot (no call anywhere:
#            the fleet clock's offset grows);
#   restart  a holder without a client that reconnects (a PAM session's
#            way: tests/holder-raw.py) and b's waiter; the key deleted,
#            then a's agent restarted;
#   reboot   a slot host a holds itself (`fleetsem reboot`, its reboot
#            command a file) and b's waiter; the key deleted, then a's
#            agent restarted, as its host's boot does (root only).
# After each: b is never granted while a holds (Redis sampled: one holder
# at most, and it is a's lease), a's agent counts no slot lost, a's job
# ends with exit 0 (a's reboot --done gives its slot back), and b gets in
# once a lets go.
# The cases come from the list: a key of the list without its case here,
# or a case whose key the list lacks, fails. Then the pairs of losses that
# matter together (the census, then a name's keys), and the host index
# lost under a running agent.
TTL=2s
. "$(dirname "$0")/lib.sh"

SRC=$(cd "$(dirname "$0")/../src/agent/library" && pwd)
mapfile -t KEYS < <(python3 "$SRC/embed-lua.py" --key-list "$SRC/keys.list")
[ "${#KEYS[@]}" -gt 4 ] || bail "embed-lua.py lists no keys from keys.list"

# key_of ID NAME HOST: the key ID is for a name and a host, on a Redis
# that is no Cluster. One function a key of the list: its case.
key_holders() { echo "fleetsem:{$1}:holders"; }
key_queue() { echo "fleetsem:{$1}:queue"; }
key_waiters() { echo "fleetsem:{$1}:waiters"; }
key_clock() { echo "fleetsem:{$1}:clock"; }
key_fleet_clock() { echo "fleetsem:clock"; }
key_census() { echo "fleetsem:census"; }
key_epoch() { echo "fleetsem:epoch"; }
key_model() { echo "fleetsem:model"; }
key_loading() { echo "fleetsem:loading"; }
key_names() { echo "fleetsem:names"; }
key_host() { echo "fleetsem:host:{$2}"; }
MOMENTS=(held quiet restart)
prereq "root, for fleetsem reboot (its moment)" [ "$(id -u)" = 0 ] && MOMENTS+=(reboot)
# PART/PARTS (argument): only every PARTS-th case, from the PART-th, and the
# host index' case with part 1 (meson runs the parts as tests of their own,
# side by side: tests/meson.build); without it, every case.
part=1 parts=1
if [ $# -gt 0 ]; then
        [[ $1 =~ ^([1-9])/([1-9])$ ]] && [ "${BASH_REMATCH[1]}" -le "${BASH_REMATCH[2]}" ] ||
                bail "the argument is PART/PARTS (1/3), not $1"
        part=${BASH_REMATCH[1]} parts=${BASH_REMATCH[2]}
fi

# Every key of the list has its case, and every case its key.
ids=()
for row in "${KEYS[@]}"; do ids+=("${row%%$'\t'*}"); done
for id in "${ids[@]}"; do
        has_case() { declare -F "key_$1" >/dev/null; }
        check "keys.list's $id has its case here (key_$id)" has_case "$id"
done
for f in $(declare -F | awk '$3 ~ /^key_/ { sub(/^key_/, "", $3); print $3 }'); do
        check "the case key_$f is a key of keys.list" grep -qx "$f" <(printf '%s\n' "${ids[@]}")
done

# host_lease 4 s: a host-held slot of a name that a census younger than
# host_lease lacks waits that long (Redis may have lost it while its host
# rebooted), and every case's loss of the census or the epoch makes one.
printf 'host_lease = 4s\n' >"$T/c.conf"
start_redis
start_agent a -c "$T/c.conf"
start_agent b -c "$T/c.conf"

holder_of() { rcli ZRANGE "fleetsem:{$1}:holders" 0 -1; }
entered() { [ -e "$T/entered-$1" ]; }
# Redis has no holder of NAME but LEASE (none while a's agent puts it
# back), and b's job has not started.
only_a() { local h; h=$(holder_of "$1"); { [ -z "$h" ] || [ "$h" = "$2" ]; } && ! entered "b-$1"; }
# a holder of NAME on HOST, in the way of MOMENT: `fleetsem run`, or a
# holder without a client that reconnects.
hold() {
        local host=$1 name=$2 moment=$3
        if [ "$moment" = restart ]; then
                python3 "$(dirname "$0")/holder-raw.py" "$NSBASE-$host" "$name" holder >"$T/raw-$name" 2>&1 &
        elif [ "$moment" = reboot ]; then
                fs "$host" reboot --slots 1 --state-dir "$T/reboot-$host" \
                        --reboot-command "touch $T/entered-a-$name" "$name" >>"$T/reboot-a-$name.out" 2>&1 &
        else
                fs "$host" run --slots 1 "$name" -- sh -c 'touch "$0"; while [ ! -e "$1" ]; do sleep 0.05; done' \
                        "$T/entered-a-$name" "$T/go-$name" 2>>"$T/run-a-$name.err" &
        fi
}
a_holds() {
        if [ "$1" = restart ]; then grep -q '^held$' "$T/raw-$2"; else entered "a-$2"; fi
}
lost_a() { metric a fleetsem_lost_total; }

case_n=0
# loss ID MOMENT [LOSE]: one key lost at one moment, and everything
# checked; LOSE NAME, a function, loses what it says instead of the key ID.
loss() {
        local id=$1 moment=$2 lose=${3:-} n key ha wb lease lost_before t0 what
        case_n=$((case_n + 1))
        [ $(( (case_n - 1) % parts + 1 )) = "$part" ] || return 0
        n=k$case_n
        what="$id ($moment)"
        [ -n "$lose" ] || key=$("key_$id" "$n" a)
        if [ "$moment" = quiet ]; then
                kill -STOP "$(agent_pid a)" "$(agent_pid b)" || bail "cannot stop the agents"
                t0=$(now_ms)
                # More than half a lease without a call anywhere.
                wait_for 6 sh -c "[ \$(( \$(date +%s%3N) - $t0 )) -gt 1200 ]" || bail "no clock"
                kill -CONT "$(agent_pid a)" "$(agent_pid b)" || bail "cannot continue the agents"
        fi
        hold a "$n" "$moment"
        ha=$!
        wait_for 10 a_holds "$moment" "$n" || { not_ok "$what: a holds $n"; return; }
        fs b run --slots 1 "$n" -- touch "$T/entered-b-$n" 2>>"$T/run-b-$n.err" &
        wb=$!
        wait_for 10 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{$n}:queue') = 1 ]" ||
                { not_ok "$what: b waits for $n"; return; }
        lease=$(holder_of "$n")
        lost_before=$(lost_a)
        if [ -n "$lose" ]; then
                "$lose" "$n"
                key="$id of $n"
        else
                rcli DEL "$key" >/dev/null || bail "DEL $key"
        fi
        if [ "$moment" = restart ] || [ "$moment" = reboot ]; then
                kill -TERM "$(agent_pid a)" || bail "cannot stop a's agent"
                wait "$(agent_pid a)"
                start_agent a -c "$T/c.conf"
                lost_before=0
        fi
        # Two leases and more: a's agent renews, or re-adopts, or puts it
        # back; b's agent asks again each time.
        check "$what: b is not granted while a holds, nor a second lease counted (DEL $key)" \
                still_after 5 only_a "$n" "$lease"
        check "$what: a still holds its lease" [ "$(holder_of "$n")" = "$lease" ]
        check "$what: a's agent counts no slot lost" [ "$(lost_a)" = "$lost_before" ]
        if [ "$moment" = restart ]; then
                kill "$ha" || bail "cannot end a's holder"
                wait "$ha"
        elif [ "$moment" = reboot ]; then
                wait "$ha"
                check "$what: a's reboot took its slot and rebooted (exit 0)" [ "$?" = 0 ]
                fs a reboot --done --running-timeout 0 --state-dir "$T/reboot-a" "$n" >>"$T/reboot-a-$n.out" 2>&1
                check "$what: a's reboot --done gives its slot back (exit 0)" [ "$?" = 0 ]
        else
                touch "$T/go-$n"
                wait "$ha"
                check "$what: a's job ends with exit 0" [ "$?" = 0 ]
        fi
        check "$what: b gets in once a let go" wait_for 10 entered "b-$n"
        entered "b-$n" || kill "$wb" || bail "cannot end b's waiter"
        wait "$wb"
}

for row in "${KEYS[@]}"; do
        id=${row%%$'\t'*}
        for moment in "${MOMENTS[@]}"; do
                loss "$id" "$moment"
        done
done

# The pairs of losses that matter together. The census, then a name's
# keys: the census lost and made again by a call on another name, then,
# once it is older than a lease (a census that young forgives a name it
# lacks: census_forgot()), all four keys of the held name. The holder's
# renewals wrote the name's entry back meanwhile, so the name is found
# forgotten, not new: its holder is put back, and nothing is granted on
# it for a lease. (Held only: a name whose keys all went tells an
# adoption nothing of a lease, which held or only waited.)
census_older_than() {
        local mark now
        int_of mark "$(rcli ZSCORE "$(key_census)" .)"
        int_of now "$(rcli TIME | head -1)000"
        [ $((now + mark)) -gt "$1" ]
}
lose_census_then_name() {
        local n=$1
        rcli DEL "$(key_census)" >/dev/null || bail "DEL of the census"
        fs b run --slots 1 "other-$n" -- true 2>>"$T/other-$n.err" || bail "a call on another name"
        wait_for 20 census_older_than 4000 || bail "the census made again is not older than a lease"
        rcli DEL "$(key_holders "$n")" "$(key_queue "$n")" "$(key_waiters "$n")" "$(key_clock "$n")" >/dev/null ||
                bail "DEL of $n's keys"
}
loss "census then the name's keys" held lose_census_then_name
# All four keys of the name at once, then the holder's agent restarted (a
# PAM-style holder; a slot the host holds itself): Redis tells nothing of
# the lease, and the host's own record, which marks a lease granted,
# tells the adoption that it held. (A waiter's record has no such mark: a
# waiter is queued again by its client.)
lose_name() {
        rcli DEL "$(key_holders "$1")" "$(key_queue "$1")" "$(key_waiters "$1")" "$(key_clock "$1")" >/dev/null ||
                bail "DEL of $1's keys"
}
for moment in restart reboot; do
        [[ " ${MOMENTS[*]} " == *" $moment "* ]] && loss "the name's four keys" "$moment" lose_name
done

# The host index lost while its agent runs is written again within a
# renewal period (a third of the lease), with its TTL. (In part 1.)
[ "$part" = 1 ] || done_testing
hold a idx held
ha=$!
wait_for 10 a_holds held idx || bail "a holds idx"
lease=$(holder_of idx)
# The host's own record of an anchored lease: in its runtime directory (a
# reboot ends the holder with it), not in its state directory.
rec=$(cat "$T/run-a/$NSBASE-a.a.leases/$lease")
like "$rec" "^idx 1 0 - (stop|ignore) by [0-9]+ [0-9]+ held $(tr -d - </proc/sys/kernel/random/boot_id)\$" \
        "a's own record of its anchored lease is in its runtime directory, with its requester, marked held in this boot"
# The requester: the process that asked, by its pid and its start time
# (/proc/PID/stat's 22nd field), the one an agent restarted since tells.
read -r rpid rstart <<<"$(sed -n 's/.* by \([0-9]*\) \([0-9]*\) held .*/\1 \2/p' <<<"$rec")"
is "$(cat "/proc/$rpid/comm" 2>&1) $(sed 's/.*) //' "/proc/$rpid/stat" 2>&1 | cut -d' ' -f20)" "fleetsem $rstart" \
        "... that requester the running fleetsem run, by its pid and start time"
# Its modification time: when the lease was last confirmed, on the boot
# clock (seconds since boot, as /proc/uptime counts them), renewed since.
mtime0=$(stat -c %Y "$T/run-a/$NSBASE-a.a.leases/$lease")
up=$(cut -d. -f1 /proc/uptime)
# headroom: no deadline: a point on the boot clock at most a minute old
# (the lease is 2 s, renewed every 0.7 s), against seconds since 1970.
check "... its time on the boot clock (${mtime0} s, up ${up} s)" test "$mtime0" -le "$up" -a "$mtime0" -ge $((up - 60))
check "... moved on by a renewal" wait_for 10 sh -c "[ \$(stat -c %Y '$T/run-a/$NSBASE-a.a.leases/$lease') -gt $mtime0 ]"
check "... not in its state directory" test ! -e "$T/state-a/$NSBASE-a.a.leases/$lease"
# Where an earlier agent kept it (its state directory): moved back to the
# runtime directory when the next agent starts, so that it is in one.
kill -TERM "$(agent_pid a)" || bail "cannot stop a's agent"
wait "$(agent_pid a)"
mv "$T/run-a/$NSBASE-a.a.leases/$lease" "$T/state-a/$NSBASE-a.a.leases/$lease" || bail "cannot move a's record"
start_agent a -c "$T/c.conf"
check "a's record an earlier agent kept in its state directory is moved to its runtime directory" \
        test -e "$T/run-a/$NSBASE-a.a.leases/$lease" -a ! -e "$T/state-a/$NSBASE-a.a.leases/$lease"
check "... and a still holds idx" wait_for 10 a_holds held idx
rcli DEL "fleetsem:host:{a}" >/dev/null || bail "DEL of a's host index"
check "a's host index, lost, is written again within a lease" \
        wait_for 6 sh -c "[ \"\$(redis-cli -s $REDIS_SOCK HKEYS 'fleetsem:host:{a}')\" = $lease ]"
int_of ttl "$(rcli PTTL "fleetsem:host:{a}")"
# headroom: the TTL set is 2 x host_lease (8 s here), and this checks it
# is past one host_lease (4 s): 4 s for the read after the write, which
# took under 0.1 s under tests/run.sh --busy.
check "... and expires (in $ttl ms), after host_lease at least" [ "$ttl" -gt 4000 ]
touch "$T/go-idx"
wait "$ha"
check "the host index leaves with the last lease" wait_for 5 sh -c "[ \$(redis-cli -s $REDIS_SOCK EXISTS 'fleetsem:host:{a}') = 0 ]"
stop_agents
done_testing
