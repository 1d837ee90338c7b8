#!/bin/bash
# Two masters at once, and the Sentinels that name them: an agent must not
# stay on a master the quorum no longer names, nor grant on it while the
# Sentinels disagree. The servers refuse REPLICAOF and SLAVEOF (renamed),
# so a master the Sentinels leave stays a master, answering ROLE as one,
# as a master they cannot reach would: only the agent's own asking can
# take it off.
#  1. The Sentinels are made to name the replica, promoted, with no
#     +switch-master said (a message missed): the agent asks them again
#     within a sixth of a lease and follows, and its holder is re-asserted
#     there, so another host is not granted its slot.
#  2. One Sentinel fails the master over alone while the other two are
#     stopped: the agent hears +switch-master but no quorum confirms it,
#     and grants nothing until the two, let go, agree; then it follows.
TTL=6s
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-ha.sh"

HA_SERVER_ARGS=(--rename-command REPLICAOF fs-replicaof --rename-command SLAVEOF fs-slaveof)
ha_start
ha_agent a
fs a run --slots 1 --no-wait warmup -- true
is "$?" 0 "an agent finds the master through the Sentinels and grants"
check "... on $HA_M" redis_now_is a "127.0.0.1:$HA_M"

# ---- 1. The Sentinels name another master and nobody says so -----------------
# (A replica of the replica, for part 2: it stays the replica's when that
# is made a master, and the Sentinels see it once they monitor that.)
R2=$(free_port)
HA_SERVER_ARGS=()
ha_server "$R2" --replicaof 127.0.0.1 "$HA_R"
check "a replica of $HA_R syncs" wait_for 15 sh -c "redis-cli -p $R2 INFO replication | grep -q 'master_link_status:up'"
job a held --no-wait --slots 1 & holder=$!
check "a's job holds the only slot of 'held'" wait_for 10 grep -q '^enter' "$T/events-held"
# The replica in sync has the holder: a new master would know of it.
check "the replica has the holder" wait_for 10 sh -c "[ \$(redis-cli -p $HA_R ZCARD 'fleetsem:{held}:holders') = 1 ]"
for s in "${HA_S[@]}"; do redis-cli -p "$s" SENTINEL REMOVE "$HA_MASTER" >/dev/null; done
redis-cli -p "$HA_R" fs-replicaof NO ONE >/dev/null
split=$(now_ms)
for s in "${HA_S[@]}"; do
        redis-cli -p "$s" SENTINEL MONITOR "$HA_MASTER" 127.0.0.1 "$HA_R" 2 >/dev/null
        redis-cli -p "$s" SENTINEL SET "$HA_MASTER" down-after-milliseconds "$HA_DOWN_AFTER" >/dev/null
done
is "$(redis-cli -p "$HA_M" ROLE | head -n 1) $(redis-cli -p "$HA_R" ROLE | head -n 1)" "master master" \
        "two masters answer as masters"
check "every Sentinel names $HA_R" wait_for 10 sh -c \
        "for s in ${HA_S[*]}; do [ \"\$(redis-cli -p \$s SENTINEL get-master-addr-by-name $HA_MASTER | sed -n 2p)\" = $HA_R ] || exit 1; done"
t0=$(now_ms)
# Nobody said +switch-master: without asking again the agent stays on
# the old master for good.
check "agent a asks the Sentinels again and follows $HA_R" wait_for 15 redis_now_is a "127.0.0.1:$HA_R"
moved=$(( $(now_ms) - t0 ))
like "$(cat "$T/agent-a.log")" "[23] of 3 Sentinels name 127.0.0.1:$HA_R the master of $HA_MASTER, no more 127.0.0.1:$HA_M; following it" \
        "and says so"
echo "# agent a followed the Sentinels' new master ${moved}ms after they named it (asked every sixth of the 6 s lease: 1000ms, and a round)"
# headroom: a second past the sixth of a lease, 6.8 times the 76 to 148 ms
# it took in three runs at once on 2 cores at a load of 16 (from when every
# Sentinel names it: the test's own SENTINEL calls, once counted in, made
# it 3756 ms once).
check "within a sixth of a lease and a second ($moved ms)" [ "$moved" -le 2000 ]
check "a re-asserted its holder on $HA_R" wait_for 10 grep -q 'Re-asserting 1 held slot(s)' "$T/agent-a.log"
ha_agent b
check "a new agent, b, finds $HA_R" wait_for 10 sh -c "FLEETSEM_NAMESPACE=$NSBASE-b $FLEETSEM status --json | grep -q '\"redis\":\"127.0.0.1:$HA_R\"'"
# (Until a lease and a second after the split: the holder's lease on
# $HA_R, as it was split off, runs out there by then unless a renews it.)
left=$(( split + 7000 - $(now_ms) ))
fs b run --wait "$(( left > 1000 ? left : 1000 ))ms" --slots 1 held -- true 2>/dev/null
is "$?" 75 "b is not granted 'held' by a lease after the split: a's holder has it on the master both agents use"
is "$(grep -c '^enter' "$T/events-held")" 1 "only a's job entered"
touch "$T/go-held"
wait "$holder"
is "$?" 0 "a's job ends as it should"
fs b run --wait 10s --slots 1 held -- true
is "$?" 0 "then b gets the slot"

# ---- 2. One Sentinel moves the master, the others are stopped ----------------
check "the first Sentinel sees $HA_R's replica" wait_for 30 sh -c \
        "redis-cli -p ${HA_S[0]} SENTINEL replicas $HA_MASTER | grep -q $R2"
check "agent a is on $HA_R" redis_now_is a "127.0.0.1:$HA_R"
kill -STOP "$(cat "$T/s${HA_S[1]}.pid")" "$(cat "$T/s${HA_S[2]}.pid")"
redis-cli -p "${HA_S[0]}" SENTINEL FAILOVER "$HA_MASTER" >/dev/null
check "the first Sentinel names $R2" wait_for 20 sh -c \
        "[ \"\$(redis-cli -p ${HA_S[0]} SENTINEL get-master-addr-by-name $HA_MASTER | sed -n 2p)\" = $R2 ]"
check "agent a hears +switch-master and stops using $HA_R" \
        wait_for 10 grep -q "may have moved; not using 127.0.0.1:$HA_R until a quorum" "$T/agent-a.log"
is "$(redis-cli -p "$HA_R" ROLE | head -n 1)" master "$HA_R still answers as a master"
fs a run --no-wait --slots 1 disputed -- touch "$T/disputed-ran" 2>/dev/null
is "$?" 75 "while no quorum names a master, a grants nothing (--no-wait: no slot now, exit 75)"
check "... and the job did not run" [ ! -e "$T/disputed-ran" ]
is "$(redis-cli -p "$HA_R" EXISTS 'fleetsem:{disputed}:clock') $(redis-cli -p "$R2" EXISTS 'fleetsem:{disputed}:clock')" "0 0" \
        "... and wrote nothing on either master"
check "a says the Sentinels do not answer" wait_for 10 grep -q "did not answer within 2s" "$T/agent-a.log"
kill -CONT "$(cat "$T/s${HA_S[1]}.pid")" "$(cat "$T/s${HA_S[2]}.pid")"
check "once the others learn of it, agent a follows $R2" wait_for 20 redis_now_is a "127.0.0.1:$R2"
fs a run --wait 20s --slots 1 disputed -- true
is "$?" 0 "and grants again"
is "$(redis-cli -p "$R2" EXISTS 'fleetsem:{disputed}:clock')" 1 "... on $R2"
done_testing
