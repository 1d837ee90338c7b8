#!/usr/bin/env python3
# many-slots.py NAMESPACE NAME COUNT [SLOTS WAIT_S]: holds COUNT slots of
# NAME through one agent from this one process (an anchor and a request
# each; a limit of COUNT, or SLOTS), prints "granted N" (with WAIT_S, the
# requests wait that long: "granted N queued M", those queued stay in
# line), waits for a line on stdin, then closes every anchor.
import os
import resource
import select
import socket
import sys

ns, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
slots = int(sys.argv[4]) if len(sys.argv) > 4 else count
wait = "%d" % (int(sys.argv[5]) * 1000000) if len(sys.argv) > 5 else "0"
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

anchors, conns = [], []
for i in range(count):
    lease = os.urandom(16).hex()
    a = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    a.bind("\0%s/lease/%s" % (ns, lease))
    a.listen(16)
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect("\0%s/agent" % ns)
    c.sendall(("ACQUIRE name=%s slots=%d lease=%s wait=%s\n" % (name, slots, lease, wait)).encode())
    anchors.append(a)
    conns.append(c)

granted, queued, pending = 0, 0, {c.fileno(): c for c in conns}
buf = {fd: b"" for fd in pending}
poller = select.poll()
for fd in pending:
    poller.register(fd, select.POLLIN)
while pending:
    events = poller.poll(10000)
    if not events:
        break
    for fd, _ in events:
        data = pending[fd].recv(4096)
        buf[fd] += data
        if b"\n" in buf[fd] or not data:
            if buf[fd].startswith(b"GRANTED"):
                granted += 1
            elif buf[fd].startswith(b"QUEUED"):
                queued += 1
            else:
                sys.stderr.write("reply: %r\n" % buf[fd])
            poller.unregister(fd)
            del pending[fd]
print("granted", granted, *(["queued", queued] if len(sys.argv) > 5 else []), flush=True)
sys.stdin.readline()
for a in anchors:
    a.close()
print("closed", flush=True)
