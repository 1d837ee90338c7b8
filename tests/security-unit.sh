#!/bin/bash
# unit=1 trusts the requester's unit only while the process that connected
# still runs: the pid of one that exited may be another's by now. A
# process outside any service is told so; one whose connecting process
# exited before the request is refused.
TTL=2s
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-security.sh"

printf 'allow = unit nobody\n' >"$T/agent.conf"
start_redis
start_agent a --config "$T/agent.conf"
like "$(attack a unit-exited)" '^ERROR code=invalid message="?pid [0-9]+ exited before its unit could be read' \
        "a request whose connecting process exited is refused"
lease=$(head -c16 /dev/urandom | od -An -tx1 | tr -d ' \n')
cp "$(dirname "$0")/agent-raw.py" "$T/agent-raw.py"
like "$(as_nobody /usr/bin/python3 "$T/agent-raw.py" "$NSBASE-a" "ACQUIRE name=unit slots=1 lease=$lease wait=0 unit=1" |
        python3 -c 'import sys, urllib.parse; print(urllib.parse.unquote(sys.stdin.read()))')" \
        '^ERROR code=invalid message="?pid [0-9]+ does not run in a systemd service' \
        "a process outside any service is told so"
done_testing
