#!/bin/bash
# Redis named by a host name: the agent looks the name up off its event
# loop, each connect. A name in /etc/hosts connects as an address does (to
# the next address when one refuses); a DNS server that never answers does
# not keep the agent from answering, and a lookup that times out or fails
# is a failed connect that says why. In a private mount namespace with
# its own resolv.conf, hosts and nsswitch.conf.
if [ -z "${FLEETSEM_PRIVATE_ETC:-}" ] && unshare -m --propagation private true 2>/dev/null; then
        FLEETSEM_PRIVATE_ETC=1 exec unshare -m --propagation private bash "$0" "$@"
fi
. "$(dirname "$0")/lib.sh"
require_that "a private mount namespace (unshare -m, as root)" test -n "${FLEETSEM_PRIVATE_ETC:-}"
require_that "IPv6 loopback" grep -q '^0\{31\}1 ' /proc/net/if_inet6

# A DNS server on port 53 of a loopback address of its own: NXDOMAIN for
# nx.*, no answer ever for anything else; each name asked, a line of
# $T/dns.log.
python3 - "$T/dns.addr" "$T/dns.log" <<'EOF' &
import os, random, socket, sys
for _ in range(100):
    addr = "127.%d.%d.53" % (random.randint(1, 254), random.randint(1, 254))
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.bind((addr, 53))
        break
    except OSError:
        s.close()
else:
    sys.exit(1)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(addr)
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
log = open(sys.argv[2], "a", buffering=1)
while True:
    q, peer = s.recvfrom(512)
    i, labels = 12, []
    while i < len(q) and q[i] and i + 1 + q[i] <= len(q):
        labels.append(q[i + 1:i + 1 + q[i]].decode(errors="replace"))
        i += 1 + q[i]
    name = ".".join(labels)
    log.write(name + "\n")
    if name.startswith("nx.") and i + 5 <= len(q):
        s.sendto(q[:2] + b"\x81\x83\x00\x01\x00\x00\x00\x00\x00\x00" + q[12:i + 5], peer)
EOF
wait_for 5 test -s "$T/dns.addr" || bail "the DNS server did not start"

# The resolver gives up after 5 s; localhost is only ::1, and
# two.fleetsem.test first an address where nothing listens.
port=$(free_port)
printf 'nameserver %s\noptions timeout:5 attempts:1\n' "$(cat "$T/dns.addr")" >"$T/resolv.conf"
printf '::1 localhost\n127.0.0.1 two.fleetsem.test\n::1 two.fleetsem.test\n' >"$T/hosts"
sed 's/^hosts:.*/hosts: files dns/' /etc/nsswitch.conf >"$T/nsswitch.conf"
for f in resolv.conf hosts nsswitch.conf; do
        mount --bind "$T/$f" "/etc/$f" || bail "cannot mount $T/$f on /etc/$f"
done
start_redis --port "$port" --bind ::1

# A name from /etc/hosts.
run_agent a --redis "redis://localhost:$port"
check "an agent reaches Redis as localhost" wait_for 10 redis_state_is a up
fs a run --slots 1 --no-wait dns -- true
is "$?" 0 "and serves a request through it"

# Each address in turn: 127.0.0.1 refuses, ::1 answers.
run_agent b --redis "redis://two.fleetsem.test:$port"
check "an agent reaches Redis at a name's second address" wait_for 10 redis_state_is b up
fs b run --slots 1 --no-wait dns -- true
is "$?" 0 "and serves a request through it"

# A lookup that hangs: the connect times out (the agent's first client
# waits for that by design), then each reconnect looks the name up again.
# While one of them hangs, the agent answers at once.
asked() { grep -cx hang.fleetsem.test "$T/dns.log"; }
asked_more() { [ "$(asked)" -gt "$1" ]; }
timeout 1 getent hosts hang.fleetsem.test >/dev/null
is "$?" 124 "a blocking lookup of hang.fleetsem.test is still waiting after 1 s"
run_agent c --redis "redis://hang.fleetsem.test:$port"
check "the agent logs that the name cannot be resolved" \
        wait_for 10 grep -q 'Failed to connect to Redis at .*cannot resolve hang.fleetsem.test: timed out' "$T/agent-c.log"
check "and counts it a failed connect" redis_state_is c down
n=$(asked)
check "the agent looks the name up again" wait_for 10 asked_more "$n"
for what in status metrics; do
        start=$(now_ms)
        FLEETSEM_NAMESPACE="$NSBASE-c" timeout 5 "$FLEETSEM" "$what" >"$T/$what.out" 2>&1
        rc=$? took=$(($(now_ms) - start))
        # headroom: 2000 ms, 9.9 times the 16 to 202 ms it took on 2 cores at
        # a load of 16 to 19 (an agent stuck in the lookup answers when it ends).
        check "fleetsem $what answers while the lookup hangs (exit $rc, in $took ms)" [ "$rc" != 124 ] && [ "$took" -lt 2000 ]
done
like "$(cat "$T/status.out")" 'unreachable: .*cannot resolve hang.fleetsem.test: timed out' "status: Redis is unreachable, and why"
like "$(cat "$T/metrics.out")" 'fleetsem_redis_up 0' "metrics: Redis is not up"

# A name the DNS server says does not exist: the resolver's words.
run_agent d --redis "redis://nx.fleetsem.test:$port"
check "a name that does not exist is a failed connect, in the resolver's words" \
        wait_for 10 grep -q 'Failed to connect to Redis at .*cannot resolve nx.fleetsem.test: Name or service not known' \
        "$T/agent-d.log"
check "and the agent says Redis is down" redis_state_is d down
is "$(metric a fleetsem_redis_up)" 1 "the agent on localhost is still up"
done_testing
