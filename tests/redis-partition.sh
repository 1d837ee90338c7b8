#!/bin/bash
# An acquire sent into a partition, which the agent gives up on: nothing
# of it may reach Redis after the agent dropped the connection. A socket
# closed with unsent data goes on sending it for as long as TCP retries,
# so once the partition healed the acquire arrived after the release the
# agent had sent on its next connection, and Redis granted the slot to a
# lease nobody held, for a lease (the fault harness's finding 22). The
# agent now resets such a connection (src/agent/connection/redis.c,
# conn_abort()).
TTL=6s
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-ha.sh"
require_that "root (nft drops the packets)" test "$(id -u)" = 0
require nft
require ss

P=$(free_port)
ha_server "$P"
# A new Redis, declared empty (as fleetsem redis-init does): no grace.
redis-cli -p "$P" SET fleetsem:epoch "$(printf '%032x' $$) 0 $(ha_master_id "$P")" >/dev/null
redis-cli -p "$P" ZADD fleetsem:census -1 . >/dev/null
run_agent a --redis "redis://127.0.0.1:$P"
fs a run --slots 1 --no-wait warm -- true
is "$?" 0 "the agent grants over TCP"

# The partition: every packet to or from Redis' port dropped, on loopback,
# as nft in a host drops what a cut network would.
NFT_TABLE=fleetsem_test_$$
trap 'nft delete table inet "$NFT_TABLE" 2>/dev/null; ha_cleanup' EXIT
partition() {
        nft -f - <<EOF
table inet $NFT_TABLE {
        chain out {
                type filter hook output priority 0;
                tcp dport $P drop
                tcp sport $P drop
        }
}
EOF
}
partition || bail "nft cannot drop Redis' packets"
# unsent_to_redis: the agent's sockets to Redis that hold data the kernel
# has not delivered ("STATE RECV-Q SEND-Q LOCAL PEER" each). A SYN or a
# FIN not yet answered counts 1 in SEND-Q (a connection being made, one
# closed with nothing left to send); a call is more.
unsent_to_redis() { ss -tnH state all "( dport = :$P )" | awk '$3 > 1'; }
none_unsent() { [ -z "$(unsent_to_redis)" ]; }

seen=$(wc -l <"$T/agent-a.log")
out=$(fs a run --slots 1 part -- true 2>&1)
is "$?" 69 "an acquire into the partition: Redis unreachable (69)"
like "$out" "Redis is unreachable" "... and says so"
check "the agent drops the connection" \
        wait_for 30 sh -c "tail -n +$((seen + 1)) '$T/agent-a.log' | grep -q 'warning: Lost connection to Redis at redis://127.0.0.1:$P/0: '"
check "while the partition lasts, no socket of the agent's holds data unsent (each was reset, not closed)" none_unsent
unsent_to_redis | sed 's/^/#   /'

nft delete table inet "$NFT_TABLE" || bail "the partition does not end"
check "the agent is back" wait_for 30 fs a run --slots 1 --no-wait after -- true
# Had the acquire been left in a closed socket, TCP would deliver it at
# its next retry after the heal (seconds): wait for the kernel to have
# nothing left to send, then look.
check "nothing of the dropped connection is left to send" wait_for 60 none_unsent
is "$(redis-cli -p "$P" ZCARD 'fleetsem:{part}:holders') $(redis-cli -p "$P" ZCARD 'fleetsem:{part}:queue')" "0 0" \
        "Redis holds no lease of the acquire given up on, nor a waiter"
fs a run --slots 1 --no-wait part -- true
is "$?" 0 "the slot of part is free at once"
done_testing
