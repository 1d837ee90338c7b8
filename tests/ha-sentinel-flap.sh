#!/bin/bash
# A failover that flaps back to a master that never caught up: R is
# master (the agents write their epoch there, naming R), a failover makes
# M master while R, now M's replica, cannot sync (a wrong masterauth), a
# job is granted on M and another waits, and a second failover makes R
# master again: the same process, with its old data and the epoch it wrote
# then. Its promotion gave it a new replication id, which the epoch names
# beside the run id: the agents take its data for a loss (a new epoch, a
# grace), re-assert the holder granted on M and queue the waiter again;
# the waiter does not get in beside the holder, and tokens do not go back.
TTL=15s
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-ha.sh"

ha_start
ha_agent a
ha_agent b
follows() { local h; for h in a b; do redis_now_is "$h" "127.0.0.1:$1" || return 1; done; }
named() { local s; for s in "${HA_S[@]}"; do [ "$(ha_master_port_of "$s")" = "$1" ] || return 1; done; }
ha_master_port_of() { timeout 5 redis-cli -p "$1" SENTINEL get-master-addr-by-name "$HA_MASTER" | sed -n 2p; }
# failover_to PORT: asks the Sentinels for a failover, once, and waits
# until all of them name PORT the master; asks again only if they settled
# on another (asking while one is under way would flap it back).
failover_to() {
        local try
        for try in 1 2 3; do
                named "$1" && return 0
                [ "$(ha_master_port_of "${HA_S[0]}")" = "$1" ] ||
                        timeout 5 redis-cli -p "${HA_S[0]}" SENTINEL FAILOVER "$HA_MASTER" >/dev/null
                wait_for 20 named "$1" && return 0
        done
        return 1
}
epoch_on() { redis-cli -p "$1" GET fleetsem:epoch; }

# ---- R master: the agents' epoch there names it ------------------------------------
check "the Sentinels fail over to the replica" failover_to "$HA_R"
check "both agents follow it" wait_for 30 follows "$HA_R"
check "the old master syncs from it" ha_settled
fs a run --slots 1 --wait 10s warmup -- true
is "$?" 0 "a job is granted on it"
e_r=$(epoch_on "$HA_R")
like "$e_r" "^[0-9a-f]{32} [0-9]+ $(ha_master_id "$HA_R")\$" "its epoch names it: its run id and replication id"

# ---- M master, R never catches up ---------------------------------------------------
redis-cli -p "$HA_R" CONFIG SET masterauth wrong-on-purpose >/dev/null
check "the Sentinels fail over to M" failover_to "$HA_M"
check "both agents follow M" wait_for 30 follows "$HA_M"
check "R is M's replica and does not sync" wait_for 20 sh -c \
        "redis-cli -p $HA_R INFO replication | tr -d '\r' | grep -qx 'master_port:$HA_M' &&
         redis-cli -p $HA_R INFO replication | tr -d '\r' | grep -qx 'master_link_status:down'"
is "$(epoch_on "$HA_R")" "$e_r" "R keeps its old data: the epoch it wrote as master"
job a flap --slots 1 --wait 120s & holder=$!
check "a's job holds flap on M" wait_for 20 grep -q '^enter' "$T/events-flap"
job b flap --slots 1 --wait 120s & waiter=$!
check "b's job waits on M" wait_for 20 sh -c "[ \$(redis-cli -p $HA_M ZCARD 'fleetsem:{flap}:queue') = 1 ]"
lease=$(redis-cli -p "$HA_M" ZRANGE 'fleetsem:{flap}:holders' 0 -1)
int_of token "$(awk '/^enter/ { print $2 }' "$T/events-flap")"
is "$(redis-cli -p "$HA_R" EXISTS 'fleetsem:{flap}:clock')" 0 "R has nothing of flap"

# ---- Back to R, its old data and epoch with it --------------------------------------
check "the Sentinels fail over back to R" failover_to "$HA_R"
check "both agents follow R" wait_for 30 follows "$HA_R"
check "R's epoch is a new one" wait_for 10 sh -c "[ \"\$(redis-cli -p $HA_R GET fleetsem:epoch)\" != '$e_r' ]"
like "$(epoch_on "$HA_R")" "^[0-9a-f]{32} [0-9]+ $(ha_master_id "$HA_R")\$" \
        "... naming R as it is now: promoted again, another replication id"
resets() { grep -cE 'lost its state since this agent last saw it|holds older state' "$T/agent-$1.log"; }
check "agent a took each of the three failovers for a loss of Redis' state, this one too" \
        wait_for 10 eval '[ "$(resets a)" = 3 ]'
check "a's holder is re-asserted on R" wait_for 20 sh -c \
        "[ \"\$(redis-cli -p $HA_R ZRANGE 'fleetsem:{flap}:holders' 0 -1)\" = '$lease' ]"
check "b's waiter waits on R" wait_for 20 sh -c "[ \$(redis-cli -p $HA_R ZCARD 'fleetsem:{flap}:queue') = 1 ]"
is "$(grep -c '^enter' "$T/events-flap")" 1 "b's job did not get in beside a's"
is "$(metric a fleetsem_lost_total)" 0 "a's job kept its slot"
touch "$T/go-flap"
wait "$holder"; wait "$waiter"
order=$(sort -k3,3n "$T/events-flap" | awk '{ print $1 "-" $4 }' | tr '\n' ' ')
is "$order" "enter-a exit-a enter-b exit-b " "b's job entered once a's ended"
int_of token_b "$(awk '/^enter/ { t = $2 } END { print t }' "$T/events-flap")"
check "b's token ($token_b) is above a's, granted on M ($token)" [ "$token_b" -gt "$token" ]
done_testing
