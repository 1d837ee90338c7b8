#!/bin/bash
# fleetsem reboot on three agents ("hosts") and Redis: --dry-run and
# --if-required take nothing; a host takes a slot it holds itself (no
# anchor: no process holds it), with its reason and the packages that asked
# for the reboot (hostile bytes dropped), and "reboots" (the reboot command
# in place of logind's); a second host waits in line until the first's
# --done; the slot survives the agent's kill and restart (re-adopted from
# the host's index, renewed) and Redis restarted empty (re-asserted); an
# unhealthy host keeps its slot; revoke frees it; a host that never comes
# back loses it after host_lease, and the journal of the agent that waits
# says so; --group caps the hosts of a group in one fixed order; revoke
# --now after Redis lost its data is not undone by the holder's agent;
# data lost while a host is down, the host back unhealthy: its --done says
# the slot went, and the cap holds for host_lease all the same.
# (A lease of 3 s, host_lease 6 s: the host-held slot runs out soon.)
TTL=3s
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || skip_all "fleetsem reboot is root's"

printf 'host_lease = 6s\n' >"$T/c.conf"
start_redis
start_agent a -c "$T/c.conf"
start_agent b -c "$T/c.conf"
start_agent c -c "$T/c.conf"

holder_of() { rcli ZRANGE "fleetsem:{$1}:holders" 0 -1; }
holder_host() { record "$1" "$(holder_of "$1")" 1; }
queued() { [ "$(waiters "$1")" = "$2" ]; }
host_holds() { [ "$(holder_host "$1")" = "$2" ]; }
expiry() { rcli ZSCORE "fleetsem:{$1}:holders" "$2"; }
# reboot HOST ARGS...: fleetsem reboot on HOST, its state in $T/state-HOST,
# the reboot a file $T/rebooted-HOST, the health check $T/healthy-HOST.
reboot() {
        local host=$1; shift
        fs "$host" reboot --state-dir "$T/state-$host" --required-file "$T/required-$host" \
                --reboot-command "touch $T/rebooted-$host" "$@"
}
done_on() {
        local host=$1; shift
        fs "$host" reboot --done --running-timeout 0 --state-dir "$T/state-$host" "$@"
}

# --dry-run and --if-required: nothing taken.
out=$(reboot a --slots 1 --dry-run --reason "kernel")
like "$out" '^Would wait for a slot of reboot \(at most 1 at once\), held by this host \(kernel\), then reboot' \
        "--dry-run says what it would do"
for i in $(seq 1 60); do echo "package-number-$i"; done >"$T/many.pkgs"
touch "$T/many"
out=$(fs a reboot --dry-run --required-file "$T/many" --reason kernel)
why=$(sed -n 's/.*held by this host (\(.*\)), then reboot.*/\1/p' <<<"$out")
like "$why" '^kernel; packages: package-number-1 package-number-2 .* package-number-[0-9]+\.\.\.$' \
        "60 packages: the reason cut at a package, with ..."
check "... within 200 bytes (${#why})" [ "${#why}" -le 200 -a "${#why}" -ge 150 ]
out=$(reboot a --slots 1 --if-required); rc=$?
is "$rc" 0 "--if-required without $T/required-a: exit 0"
like "$out" '^No reboot required' "... and says so"
is "$(holders reboot)$(rcli HLEN fleetsem:host:{a})" "00" "Redis: nothing taken by either"
check "nothing rebooted" test ! -e "$T/rebooted-a"

# A request refused for want of a limit leaves nothing behind: once the
# fleet limit is set, the next one is granted within a wait shorter than
# host_lease (the fault harness' finding 15 was a Redis that had lost its
# data, whose slots hosts hold themselves wait host_lease, not the refusal).
nl() { fs a reboot --state-dir "$T/state-nl" --reboot-command "touch $T/rebooted-nl" "$@" nolimit; }
nl >/dev/null 2>&1; is "$?" 78 "no fleet limit and no --slots: 78"
is "$(waiters nolimit)$(holders nolimit)" "00" "... nothing of it in Redis"
fs a fleet-limit nolimit 1 >/dev/null || bail "cannot set nolimit's fleet limit"
nl --wait 3s >/dev/null 2>&1; is "$?" 0 "with the fleet limit set, the next request is granted within 3 s (host_lease 6 s)"
check "... and reboots" test -e "$T/rebooted-nl"
fs a reboot --release --state-dir "$T/state-nl" nolimit >/dev/null; is "$?" 0 "... --release gives it back"
is "$(holders nolimit)" 0 "Redis: nolimit free"

# The record of a slot the host holds itself is on disk once written (a
# power loss right after the grant keeps it): its temporary file
# written and synced, renamed, then its folder synced. a's agent's system
# calls, traced while it grants the slot below.
tracer=""
if has_tool strace; then
        strace -f -o "$T/strace-a" -e trace=openat,write,fsync,rename,renameat,renameat2 -p "$(agent_pid a)" \
                2>"$T/strace-a.err" &
        tracer=$!
        wait_for 10 grep -q 'attached' "$T/strace-a.err" || bail "strace could not attach to a's agent"
fi

# a takes the slot: its reason, and the packages, hostile bytes dropped.
touch "$T/required-a"
printf 'linux-image-6.1.0-99-amd64\n\033[31mlibc6\nlibc6\n$(reboot)\n' >"$T/required-a.pkgs"
out=$(reboot a --slots 1 --if-required --reason "kernel 6.1.99" --health "test -e $T/healthy-a"); rc=$?
is "$rc" 0 "a: fleetsem reboot exits 0"
check "a: the reboot command ran" test -e "$T/rebooted-a"
check "Redis: host a holds the slot of reboot" host_holds reboot a
lease_a=$(holder_of reboot)
like "$(rcli HGET fleetsem:host:{a} "$lease_a")" '^reboot 1 0 - ignore 1 host-held$' \
        "a's index records the slot as host-held"
# The host's own record of it: in its state directory, which a reboot
# keeps, not in its runtime directory, which a reboot empties.
boot_id=$(tr -d - </proc/sys/kernel/random/boot_id)
like "$(cat "$T/state-a/$NSBASE-a.a.leases/$lease_a")" "^reboot 1 0 - ignore 1 host-held held $boot_id\$" \
        "a's own record of the slot is in its state directory, marked held in this boot"
check "... not in its runtime directory" test ! -e "$T/run-a/$NSBASE-a.a.leases/$lease_a"
if [ -n "$tracer" ]; then
        kill -INT "$tracer"
        wait "$tracer"
        # What a's agent did to the record's files, in order: open (the
        # temporary file), write and fsync (of its fd), rename (to the
        # lease's name), fsync-dir (of the folder the rename was in).
        steps=$(python3 - "$T/strace-a" "$lease_a" <<'EOF'
import re, sys
lease, out, fd, dirfd = sys.argv[2], [], None, None
for line in open(sys.argv[1]):
    m = re.match(r'\d+ +(\w+)\((.*)\) += (-?\d+)', line)
    if not m:
        continue
    call, args, ret = m.group(1), m.group(2), m.group(3)
    if call == 'openat' and '".%s"' % lease in args and 'O_CREAT' in args:
        fd, out = ret, ['open']
    elif fd is None:
        continue
    elif call in ('write', 'fsync') and args.split(',')[0] == fd:
        out.append(call)
    elif call.startswith('rename') and '".%s"' % lease in args and '"%s"' % lease in args:
        dirfd = args.split(',')[0]
        out.append('rename')
    elif call == 'fsync' and args == dirfd and ret == '0':
        out.append('fsync-dir')
print(' '.join(out))
EOF
)
        is "$steps" "open write fsync rename fsync-dir" "a's record of the slot was synced, renamed into place, and its folder synced"
fi
json=$(fs b status --json reboot)
like "$json" '"hold":"host","reason":"kernel 6\.1\.99; packages: linux-image-6\.1\.0-99-amd64 31mlibc6 libc6 reboot"' \
        "status --json: held by the host, why, the packages sanitised and once each"
like "$(fs b status reboot)" ' a +- +\(host\) .*kernel 6\.1\.99' "status: held by host a, no process, why"
is "$(metric a 'fleetsem_host_held_slots{name="reboot"}')" 1 "a's metrics: 1 host-held slot of reboot"

# b waits in line.
reboot b --slots 1 --wait 120s >"$T/b.out" 2>&1 & rb_b=$!
check "b waits in line for reboot" wait_for 10 queued reboot 1

# a's agent killed and started again: still held, re-adopted, renewed.
kill -KILL "$(agent_pid a)"
check "with a's agent gone, a's slot stays held past its lease_ttl" still_after 4 host_holds reboot a
start_agent a -c "$T/c.conf"
check "a's new agent re-adopts it" wait_for 10 grep -q 'Re-adopted 1 held slot' "$T/agent-a.log"
check "... its record still in its state directory (a reboot keeps it), not moved to its runtime directory" \
        test -e "$T/state-a/$NSBASE-a.a.leases/$lease_a" -a ! -e "$T/run-a/$NSBASE-a.a.leases/$lease_a"
before=$(expiry reboot "$lease_a")
check "... and renews it" wait_for 10 sh -c "[ \"\$(redis-cli -s '$REDIS_SOCK' ZSCORE 'fleetsem:{reboot}:holders' $lease_a)\" != '$before' ]"
token_a=$(record reboot "$lease_a" 4)

# Redis restarted empty: a's slot re-asserted, with its token.
stop_redis
start_redis
check "Redis restarted empty: a's slot is re-asserted" wait_for 15 host_holds reboot a
is "$(record reboot "$lease_a" 4)" "$token_a" "... with its token"
check "b still waits" wait_for 15 queued reboot 1

# Unhealthy: a keeps its slot.
done_on a >/dev/null; rc=$?
is "$rc" 1 "a: --done with a failing health command: exit 1"
check "... a keeps its slot" host_holds reboot a
check "... and b waits on" still_after 1 queued reboot 1

# Healthy: released; b goes.
touch "$T/healthy-a"
done_on a >/dev/null; rc=$?
is "$rc" 0 "a: --done, healthy: exit 0"
check "b gets the slot once a's --done released it" wait_for 10 host_holds reboot b
wait "$rb_b"; is "$?" 0 "b: fleetsem reboot exits 0"
check "b: rebooted" test -e "$T/rebooted-b"
check "a's state is gone" test ! -e "$T/state-a/reboot-reboot"
is "$(rcli HLEN fleetsem:host:{a})" 0 "a's index is empty"

# Nobody but b's own host releases it: a's release finds nothing.
fs a reboot --release --state-dir "$T/state-a" >/dev/null
check "a's --release leaves b's slot" host_holds reboot b
# Root's revoke frees it.
lease_b=$(holder_of reboot)
fs a revoke --now "$lease_b" >/dev/null; rc=$?
is "$rc" 0 "revoke --now of b's host-held slot: exit 0"
check "... Redis: free" wait_for 10 sh -c "[ \$(redis-cli -s '$REDIS_SOCK' ZCARD 'fleetsem:{reboot}:holders') = 0 ]"
check "... b's agent let it go" wait_for 10 metric_is b 'fleetsem_host_held_slots{name="reboot"}' 0

# c takes it and never comes back: freed after host_lease (6 s), and the
# journal of a, whose agent waits, says so.
reboot c --slots 1 >/dev/null || bail "c could not take the slot"
lease_c=$(holder_of reboot)
kill -KILL "$(agent_pid c)"
reboot a --slots 1 --wait 60s >"$T/a2.out" 2>&1 & rb_a=$!
check "a waits behind c" wait_for 10 queued reboot 1
check "c's slot outlives lease_ttl" still_after 3 host_holds reboot c
check "a gets it once c's host_lease ran out" wait_for 15 host_holds reboot a
wait "$rb_a"; is "$?" 0 "a: fleetsem reboot exits 0"
check "a's journal: c's slot ran out" grep -q "Slot of reboot held by host c (lease $lease_c) ran out" "$T/agent-a.log"
done_on a >/dev/null || bail "a could not give its slot back"

# Groups: a group of one caps b behind a although reboot has room for two.
reboot a --slots 2 --group r1:1 >/dev/null || bail "a could not take the group slots"
is "$(holder_host reboot:r1) $(holder_host reboot)" "a a" "a holds reboot:r1 and reboot"
reboot b --slots 2 --group r1:1 --wait 60s >"$T/b2.out" 2>&1 & rb_b=$!
check "b waits for reboot:r1" wait_for 10 queued reboot:r1 1
check "... and does not take reboot before it" still_after 1 sh -c "[ \$(redis-cli -s '$REDIS_SOCK' ZCARD 'fleetsem:{reboot}:holders') = 1 ]"
done_on a >/dev/null; is "$?" 0 "a: --done releases both"
check "b then holds reboot:r1 and reboot" wait_for 10 sh -c "[ \"\$(redis-cli -s '$REDIS_SOCK' ZCARD 'fleetsem:{reboot}:holders')\" = 1 ] && [ \"\$(redis-cli -s '$REDIS_SOCK' ZCARD 'fleetsem:{reboot:r1}:holders')\" = 1 ]"
is "$(holder_host reboot:r1) $(holder_host reboot)" "b b" "... b's"
wait "$rb_b"; is "$?" 0 "b: fleetsem reboot exits 0"
fs b reboot --release --state-dir "$T/state-b" >/dev/null; is "$?" 0 "b: --release (the groups from its state)"
is "$(holders reboot:r1)$(holders reboot)" "00" "Redis: both free"

# The name's keys outlive a host that is down: a short idle_time, and a
# waiter that gives up (its release would let the keys go with idle_time)
# while d, down, holds the slot: d's slot stays for its host_lease.
# (The sections from here on take names of their own after Redis was
# restarted empty: a census younger than the caller's host_lease takes a
# name it lacks for forgotten, and its first host-held slot is granted one
# host_lease later (docs/design.md, What Redis forgets while it stays up).
# Their host_lease is as short as what each checks allows: mostly shorter
# than the census' age by then, and a wait of it short when it is not.)
printf 'host_lease = 16s\nidle_time = 6s\n' >"$T/short.conf"
start_agent d -c "$T/short.conf"
start_agent e -c "$T/short.conf"
fs d reboot --state-dir "$T/state-d" --reboot-command true --slots 1 kept >/dev/null || bail "d could not take kept"
kill -KILL "$(agent_pid d)"
fs e reboot --state-dir "$T/state-e" --reboot-command true --slots 1 --wait 1s kept >/dev/null 2>&1
is "$?" 75 "e gives up on kept after its --wait: 75"
check "d's slot outlives idle_time after e's release (its host_lease: 16 s)" still_after 8 host_holds kept d

# Revoked while its name still grants nothing after Redis lost its data
# (for host_lease: a host down then could not put its slot back):
# revoke --now frees it as its host's release would, and its agent, which
# renewed it since, does not put it back as Redis' loss; the waiter is
# granted nothing within host_lease all the same (g's --wait of 15 s,
# begun before the reset, ends within 25 s of it).
printf 'host_lease = 25s\n' >"$T/long.conf"
start_agent f -c "$T/long.conf"
start_agent g -c "$T/long.conf"
fs f reboot --state-dir "$T/state-f" --reboot-command true --slots 1 rv >/dev/null || bail "f could not take rv"
lease_f=$(holder_of rv)
fs g reboot --state-dir "$T/state-g" --reboot-command true --slots 1 --wait 15s rv >"$T/out-g" 2>&1 & rb_g=$!
check "g waits for rv" wait_for 10 queued rv 1
stop_redis
start_redis
check "Redis restarted empty: f's slot of rv is re-asserted" wait_for 15 host_holds rv f
before=$(expiry rv "$lease_f")
check "... and renewed since" wait_for 10 sh -c "[ \"\$(redis-cli -s '$REDIS_SOCK' ZSCORE 'fleetsem:{rv}:holders' $lease_f)\" != '$before' ]"
# (g's agent reconnects on its own backoff: its revoke needs Redis.)
check "g's agent is back on Redis" wait_for 15 fs g status rv
fs g revoke --now "$lease_f" >/dev/null; is "$?" 0 "revoke --now of f's slot of rv: exit 0"
check "f's agent lets it go" wait_for 10 metric_is f 'fleetsem_host_held_slots{name="rv"}' 0
check "... and does not put it back" still_after 3 sh -c "[ \$(redis-cli -s '$REDIS_SOCK' ZCARD 'fleetsem:{rv}:holders') = 0 ]"
wait "$rb_g"
is "$?" 75 "g gets nothing within host_lease of the reset: 75 after its --wait"
like "$(cat "$T/out-g")" "rv: no slot is granted for another [0-9a-z ]+: Redis lost" "... and was told why it waits, and how long"

# Data lost while a host is down (FLUSHALL, then the name's keys DEL'd),
# the host back unhealthy: its --done says it holds nothing any more and
# why (exit 3), not that it keeps the slot; the next host is granted
# nothing within host_lease of the loss all the same, then reboots. Back
# healthy, --done says the slot had gone (exit 2) and forgets its state.
printf 'host_lease = 12s\n' >"$T/lost.conf"
# h back from its reboot: an agent in a new boot, whose id is another (it
# reads it from /proc: a file bound over it, in a mount namespace of its
# own). Its record of the slot is of the boot before: not a slot it may
# claim it held when Redis has nothing of it.
new_boot_agent() {
        cat /proc/sys/kernel/random/uuid >"$T/boot-id-h"
        cat >"$T/fleetsemd-new-boot" <<EOF
#!/bin/sh
exec unshare -m sh -c 'mount --bind "\$0" /proc/sys/kernel/random/boot_id && exec "\$@"' "$T/boot-id-h" "$FLEETSEMD" "\$@"
EOF
        chmod +x "$T/fleetsemd-new-boot"
        FLEETSEMD="$T/fleetsemd-new-boot" start_agent "$@"
}
start_agent h -c "$T/lost.conf"
start_agent i -c "$T/lost.conf"
i_not_yet() { [ ! -e "$T/rebooted-i" ] && [ "$(holders lost)" = 0 ]; }
for how in FLUSHALL DEL; do
        rm -f "$T/rebooted-i" "$T/healthy-h"
        fs h reboot --state-dir "$T/state-h" --reboot-command true --slots 1 --health "test -e $T/healthy-h" \
                lost >/dev/null || bail "h could not take lost"
        lease_h=$(holder_of lost)
        kill -KILL "$(agent_pid h)"     # h goes down
        fs i reboot --state-dir "$T/state-i" --reboot-command "touch $T/rebooted-i" --slots 1 --wait 90s lost \
                >"$T/out-i" 2>&1 & rb_i=$!
        check "$how: i waits for lost behind h, down" wait_for 10 queued lost 1
        if [ "$how" = FLUSHALL ]; then
                rcli FLUSHALL >/dev/null
        else
                # shellcheck disable=SC2046
                rcli DEL $(rcli --scan --pattern 'fleetsem:{lost}:*') >/dev/null
        fi
        lost_ms=$(now_ms)
        is "$(holders lost)" 0 "$how: Redis holds no slot of lost"
        new_boot_agent h -c "$T/lost.conf"  # h is back, unhealthy
        done_on h lost >"$T/done-h" 2>&1; rc=$?
        out=$(cat "$T/done-h")
        is "$rc" 3 "$how: h's --done, unhealthy, its slot gone: exit 3"
        like "$out" "no longer holds its slot of lost \\(lease $lease_h\\): Redis has no such holder" \
                "... and says it no longer holds it"
        like "$out" "not healthy, and Redis no longer counts its slot of lost" "... and that the rollout does not wait for it"
        log_lacks "$T/done-h" "keeps its slot" "no longer holds its slot" "... not that it keeps it"
        check "$how: h's state is kept" test -e "$T/state-h/reboot-lost"
        left=$(( (lost_ms + 12000 - $(now_ms)) / 1000 - 2 ))
        check "$how: i is granted nothing within host_lease (12 s) of the loss (checked for ${left} s)" \
                still_after "$left" i_not_yet
        check "$how: i then takes it and reboots" wait_for 40 test -e "$T/rebooted-i"
        wait "$rb_i"; is "$?" 0 "$how: i: fleetsem reboot exits 0"
        touch "$T/healthy-h"
        out=$(done_on h lost 2>&1); rc=$?
        is "$rc" 2 "$how: h's --done, healthy now, its slot gone: exit 2"
        check "... its state gone" test ! -e "$T/state-h/reboot-lost"
        fs i reboot --release --state-dir "$T/state-i" lost >/dev/null || bail "i could not give lost back"
done

# A host frozen past two thirds of host_lease keeps the slot it holds
# itself: it has no job to stop in time, and given back then it would let
# another host start its reboot while this one may still be in its own
# (the fault harness, seed 23). Its next renewal finds it still in Redis.
start_agent j -c "$T/lost.conf"
fs j reboot --state-dir "$T/state-j" --reboot-command true --slots 1 frozen >/dev/null || bail "j could not take frozen"
lease_j=$(holder_of frozen)
int_of exp_j "$(expiry frozen "$lease_j")"
kill -STOP "$(agent_pid j)"
# Frozen until two thirds of host_lease (8 s of 12) went by since its last
# renewal (its expiry less 12 s, on Redis' clock): 8.3 s, 3.7 s before the
# expiry, which its renewal after the thaw must reach Redis before.
# headroom: thaw to renewal 0.1-0.5 s under load, against 3.7 s left
redis_now_ms() { local s us; { read -r s; read -r us; } < <(rcli TIME); echo $((s * 1000 + us / 1000)); }
# headroom: a point on Redis' clock, not a deadline (see above)
past_two_thirds() { [ "$(redis_now_ms)" -ge $((exp_j - 3700)) ]; }
check "j's agent frozen past two thirds of host_lease since its last renewal" wait_for 20 past_two_thirds
kill -CONT "$(agent_pid j)"
renewed_j() { local v e; v=$(expiry frozen "$lease_j"); [ -n "$v" ] || return 1; int_of e "$v"; [ "$e" -gt "$exp_j" ]; }
check "thawed, j's agent renews its slot of frozen (its expiry in Redis moves on)" wait_for 10 renewed_j
check "Redis: host j holds it still" host_holds frozen j
agent_lacks j "LOST slot of frozen \(token [0-9]+\)" "j's agent did not take it for lost"
fs j reboot --release --state-dir "$T/state-j" frozen >/dev/null || bail "j could not give frozen back"

# Bad input, and not root.
reboot a --group 'r1' >/dev/null 2>&1; is "$?" 64 "--group without :M: 64"
reboot a --health "$(printf 'a\nb')" >/dev/null 2>&1; is "$?" 64 "a health command on two lines: 64"
if prereq "setpriv and the user nobody" sh -c 'command -v setpriv && id nobody'; then
        setpriv --reuid=nobody --regid=nogroup --clear-groups env FLEETSEM_NAMESPACE="$NSBASE-a" "$FLEETSEM" \
                reboot --slots 1 >/dev/null 2>&1
        is "$?" 77 "nobody: 77"
        out=$(setpriv --reuid=nobody --regid=nogroup --clear-groups /usr/bin/python3 "$(dirname "$0")/agent-raw.py" \
                "$NSBASE-a" "ACQUIRE name=reboot slots=1 lease=$(printf '%032x' 7) wait=0 hold=host")
        like "$out" '^ERROR code=permission' "the agent refuses nobody's hold=host"
fi

done_testing
