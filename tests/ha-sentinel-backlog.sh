#!/bin/bash
# A master that gets its first replica makes a new replication id (with no
# history: it creates its backlog); so does one that drops it. The epoch
# names a master by its run id and replication id, so that a failover is
# seen; this change is none (the same process, the same data), and an
# agent that connects after it must not take it for one: no new epoch, no
# grace in which its releases hand nothing over. (The fault harness saw
# it: an agent back from a partition after the master's restart started a
# failover's grace alone, and its waiters' slots stayed free for 3 s.)
TTL=6s
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-ha.sh"

HA_M=$(free_port); HA_R=$(free_port)
HA_S=("$(free_port)" "$(free_port)" "$(free_port)")
ha_server "$HA_M"
for p in "${HA_S[@]}"; do ha_sentinel "$p"; done
redis-cli -p "$HA_M" SET fleetsem:epoch "$(printf '%032x' $$) 0 $(ha_master_id "$HA_M")" >/dev/null
redis-cli -p "$HA_M" ZADD fleetsem:census -1 . >/dev/null
HA_URL="sentinel://127.0.0.1:${HA_S[0]},127.0.0.1:${HA_S[1]},127.0.0.1:${HA_S[2]}/$HA_MASTER"
before=$(ha_master_id "$HA_M")
ha_agent a
fs a run --slots 1 --no-wait warmup -- true
is "$?" 0 "an agent on a master without a replica grants"
epoch=$(redis-cli -p "$HA_M" GET fleetsem:epoch | cut -d' ' -f1)

ha_server "$HA_R" --replicaof 127.0.0.1 "$HA_M"
check "a replica syncs" wait_for 15 sh -c "redis-cli -p $HA_R INFO replication | grep -q 'master_link_status:up'"
after=$(ha_master_id "$HA_M")
is "${after:0:40}" "${before:0:40}" "the master is the same process (run id)"
check "... with a new replication id (its backlog made for the replica)" [ "${after:40}" != "${before:40}" ]
is "$(redis-cli -p "$HA_M" INFO replication | tr -d '\r' | sed -n 's/^master_replid2://p')" \
        0000000000000000000000000000000000000000 "... and no history: it followed no other master"

ha_agent b
fs b run --slots 1 --no-wait after -- true
is "$?" 0 "an agent that connects now grants at once: no failover's grace"
is "$(redis-cli -p "$HA_M" GET fleetsem:epoch | cut -d' ' -f1)" "$epoch" "the epoch is the same"
is "$(redis-cli -p "$HA_M" GET fleetsem:epoch | cut -d' ' -f3)" "$after" "... naming the master as it is now"
agent_lacks b 'lost its state' "b's journal says nothing of a lost state"
fs a run --slots 1 --no-wait again -- true
is "$?" 0 "and the first agent grants on as before"
done_testing
