#!/usr/bin/env python3
# anchor-ask.py NAMESPACE LEASE NAME SLOTS [HOLD]: binds the anchor
# @NAMESPACE/lease/LEASE itself (any lease id, e.g. one seen elsewhere),
# asks the agent for NAME with it without waiting, and prints the replies
# until the agent closes or HOLD seconds (default 2) pass.
import socket
import sys
import time

ns, lease, name, slots = sys.argv[1:5]
hold = float(sys.argv[5]) if len(sys.argv) > 5 else 2.0
anchor = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
anchor.bind("\0%s/lease/%s" % (ns, lease))
anchor.listen(16)
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
# Every step bounded: an agent that stops answering (or accepting) makes
# this print what it has, for the test to fail on, not hang.
s.settimeout(hold)
s.connect("\0%s/agent" % ns)
s.sendall(("ACQUIRE name=%s slots=%s lease=%s wait=0\n" % (name, slots, lease)).encode())
end = time.monotonic() + hold
buf = b""
try:
    while time.monotonic() < end:
        s.settimeout(max(end - time.monotonic(), 0.01))
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
except socket.timeout:
    pass
sys.stdout.write(buf.decode("latin-1"))
