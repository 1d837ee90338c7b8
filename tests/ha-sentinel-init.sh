#!/bin/bash
# fleetsem redis-init under Sentinel: the master is the one a quorum of
# the Sentinels names, as the agent takes it (here the first Sentinel of
# the URL lies, naming a master of its own, which hears nothing), and the
# epoch names that master by its run id and replication id, as the
# agents' own epoch does: the first agent grants at once, taking it for
# neither a first use nor a failover. Without a quorum, nothing is sent.
TTL=15s
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-ha.sh"
[ "$(id -u)" = 0 ] || skip_all "fleetsem redis-init runs as root only"

HA_NEW=1 ha_start
FM=$(free_port)
python3 "$(dirname "$0")/fake-cluster-node.py" "$FM" 127.0.0.1 "$FM" 0 >"$T/fake-master.log" 2>&1 &
FS=$(free_port)
python3 "$(dirname "$0")/fake-sentinel.py" "$FS" "$HA_MASTER" 127.0.0.1 "$FM" >"$T/fake-sentinel.log" 2>&1 &
wait_for 30 grep -q listening "$T/fake-master.log" || bail "the fake master did not start"
wait_for 30 grep -q listening "$T/fake-sentinel.log" || bail "the fake Sentinel did not start"
HA_URL="sentinel://127.0.0.1:$FS,127.0.0.1:${HA_S[0]},127.0.0.1:${HA_S[1]}/$HA_MASTER"
printf 'redis = %s\nlease_ttl = %s\n' "$HA_URL" "$TTL" >"$T/fleetsem.conf"

# Without a quorum (the liar and one real Sentinel): nothing sent anywhere.
printf 'redis = sentinel://127.0.0.1:%s,127.0.0.1:%s/%s\n' "$FS" "${HA_S[0]}" "$HA_MASTER" >"$T/two.conf"
out=$("$FLEETSEM" redis-init --config "$T/two.conf" 2>&1)
is "$?" 69 "with the lying and one real Sentinel, no quorum: refused (69)"
like "$out" "No quorum of Sentinels names the master of $HA_MASTER: 2 of 2 Sentinels answered, at most 1 agree" \
        "... saying so"
is "$(redis-cli -p "$HA_M" DBSIZE)" 0 "... and nothing is written"

out=$("$FLEETSEM" redis-init --config "$T/fleetsem.conf" 2>&1)
is "$?" 0 "with the lying Sentinel first of three: declared (0)"
like "$out" "Redis at 127\.0\.0\.1:$HA_M declared empty: it held no fleetsem key; fleetsem:epoch \(naming this master\) and fleetsem:census written" \
        "... on the master the quorum names"
epoch=$(redis-cli -p "$HA_M" GET fleetsem:epoch)
like "$epoch" "^[0-9a-f]{32} 0 $(ha_master_id "$HA_M")\$" \
        "the epoch names the master by its run id and replication id, its grace long over"
log_lacks "$T/fake-master.log" '^got' listening "the lying Sentinel's master got nothing: no AUTH, no command"

ha_agent a
out=$(fs a run --slots 1 --no-wait first -- echo ran 2>&1)
is "$?" 0 "the first request, without waiting, is granted at once"
is "$out" "ran" "... and its command runs"
is "$(metric a fleetsem_reset_grace_seconds)" 0 "metrics: no grace"
agent_lacks a 'No slot is granted through Redis' "the agent logs no grace: neither a first use nor a failover"
is "$(redis-cli -p "$HA_M" GET fleetsem:epoch)" "$epoch" "the agent kept the declared epoch"

out=$("$FLEETSEM" redis-init --config "$T/fleetsem.conf" 2>&1)
is "$?" 65 "in use now: refused (65)"
is "$(redis-cli -p "$HA_M" GET fleetsem:epoch)" "$epoch" "... the epoch unchanged"

done_testing
