#!/bin/bash
# One Sentinel's word is not enough to move the agent, nor to get the
# password: a master is taken once a quorum of the URL's Sentinels (by
# default a majority) name it. Here the first Sentinel of the URL, the one
# the agent watches, is a fake of the test's own: it names a master of its
# own (a listener that records what it is sent) and then says
# +switch-master to it. The agent stops using the real master until the
# quorum still names it (3 s), then stays on it; the fake master hears
# nothing. With only the fake and one real Sentinel, no
# quorum: the agent connects to neither; with sentinel_quorum = 1 it takes
# the fake's word and the fake master gets the AUTH: the quorum is what
# kept it out. fleetsemd --check-redis and --load-library take the master
# the same way: with a password and no quorum they refuse, and the fake
# master hears nothing from them either.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-ha.sh"

ha_start
FM=$(free_port)
python3 "$(dirname "$0")/fake-cluster-node.py" "$FM" 127.0.0.1 "$FM" 0 >"$T/fake-master.log" 2>&1 &
FAKES=($!)
FS=$(free_port)
python3 "$(dirname "$0")/fake-sentinel.py" "$FS" "$HA_MASTER" 127.0.0.1 "$FM" >"$T/fake-sentinel.log" 2>&1 &
FAKES+=($!)
wait_for 30 grep -q listening "$T/fake-master.log" || bail "the fake master did not start"
wait_for 30 grep -q listening "$T/fake-sentinel.log" || bail "the fake Sentinel did not start"
# (The real servers have no password; only the last agent, which never
# reaches them, is given one.)
printf 'fleetsem-test\n' >"$T/pw"
chmod 600 "$T/pw"

HA_URL="sentinel://127.0.0.1:$FS,127.0.0.1:${HA_S[0]},127.0.0.1:${HA_S[1]}/$HA_MASTER"

# The operator's tools ask the Sentinels as the agent does: the quorum's
# master, never the first answer (the fake's, first in the URL).
out=$("$FLEETSEMD" --redis "$HA_URL" --check-redis 2>&1); rc=$?
is "$rc" 0 "fleetsemd --check-redis with a lying Sentinel first of three: exit 0"
like "$out" "^Redis at 127\.0\.0\.1:$HA_M: version" "... and it looked at the master the quorum names"
out=$("$FLEETSEMD" --redis "$HA_URL" --load-library 2>&1); rc=$?
is "$rc" 0 "fleetsemd --load-library there: exit 0"
like "$out" "^Redis at 127\.0\.0\.1:$HA_M: fleetsem library version [0-9]* loaded" "... into the quorum's master"
printf 'redis = sentinel://127.0.0.1:%s,127.0.0.1:%s/%s\nredis_password_file = %s\n' \
        "$FS" "${HA_S[0]}" "$HA_MASTER" "$T/pw" >"$T/tool.conf"
out=$("$FLEETSEMD" -c "$T/tool.conf" --load-library 2>&1); rc=$?
is "$rc" 1 "with the fake and one real Sentinel, --load-library with a password refuses: exit 1"
like "$out" "No quorum of Sentinels names the master of $HA_MASTER: 2 of 2 Sentinels answered, at most 1 agree" \
        "... saying that no quorum names the master"
out=$("$FLEETSEMD" -c "$T/tool.conf" --check-redis 2>&1); rc=$?
is "$rc" 1 "... and so does --check-redis"
like "$out" "at most 1 agree on .*; nothing sent to any master" "... saying that nothing was sent"
log_lacks "$T/fake-master.log" '^got' listening "the fake master got no connection from the tools: no AUTH, no command"

ha_agent a
fs a run --wait 20s --slots 1 quorum -- true
is "$?" 0 "with a fake Sentinel first of three, a job gets a slot"
is "$(redis-cli -p "$HA_M" EXISTS 'fleetsem:{quorum}:clock')" 1 "... on the real master"
# (The agent's word first: the fake prints its line once its send returned,
# which may be after the agent read it.)
check "the fake Sentinel's +switch-master to its master: the agent hears it and asks every Sentinel" \
        wait_for 10 grep -q "says the master $HA_MASTER moved from 127.0.0.1:1 to 127.0.0.1:$FM; asking every Sentinel" "$T/agent-a.log"
check "... which the fake says it sent" wait_for 10 grep -q '^switched' "$T/fake-sentinel.log"
check "... uses no master while no quorum confirms the move" \
        grep -q "may have moved; not using 127.0.0.1:$HA_M until a quorum" "$T/agent-a.log"
check "... and the real one again once the quorum still names it" \
        wait_for 10 grep -q "still name 127.0.0.1:$HA_M the master of $HA_MASTER; using it again" "$T/agent-a.log"
fs a run --wait 20s --slots 1 quorum -- true
is "$?" 0 "... and stays on the real master: jobs still run"
log_lacks "$T/fake-master.log" '^got' listening "the fake master got no connection: no AUTH, no command"

# The fake and one real Sentinel: no majority names a master.
HA_URL="sentinel://127.0.0.1:$FS,127.0.0.1:${HA_S[0]}/$HA_MASTER"
ha_agent b
check "with the fake and one real Sentinel, the agent says no quorum names the master" \
        wait_for 10 grep -q "no quorum names the master of $HA_MASTER: 2 of 2 Sentinels answered, at most 1 agree" "$T/agent-b.log"
fs b run --no-wait --slots 1 none -- true 2>/dev/null
is "$?" 69 "... and grants nothing (Redis unavailable, exit 69)"
log_lacks "$T/fake-master.log" '^got' listening "... and the fake master still got nothing"

# The same with sentinel_quorum = 1: one Sentinel's word is taken. With
# both answering, the first answer wins a round, and the real one is often
# first: it is stopped, so the fake's word is the only one.
kill -STOP "$(cat "$T/s${HA_S[0]}.pid")"
printf 'redis = %s\nredis_password_file = %s\nsentinel_quorum = 1\n' "$HA_URL" "$T/pw" >"$T/c.conf"
run_agent c -c "$T/c.conf"
check "with sentinel_quorum = 1 the agent takes the fake's master, and sends it the password" \
        wait_for 10 grep -q '^got AUTH' "$T/fake-master.log"
kill -CONT "$(cat "$T/s${HA_S[0]}.pid")"

printf 'redis = %s\nsentinel_quorum = 3\n' "$HA_URL" >"$T/bad.conf"
"$FLEETSEMD" --check-config -c "$T/bad.conf" >"$T/check.out" 2>&1
is "$?" 1 "a quorum above the Sentinels named is a configuration error"
like "$(cat "$T/check.out")" "sentinel_quorum is 3, but the URL names 2 Sentinel\(s\)" "... saying why"

kill "${FAKES[@]}"
wait "${FAKES[@]}" 2>/dev/null
done_testing
